// The embeddable widget: <script src="{PUBLIC_URL}/embed.js" data-bot="<bot id>" data-token="<embed token>">
// puts a chat button bottom-right that opens a small panel. It lives in a shadow root so the
// host page's CSS neither styles it nor is styled by it, and it talks to the bot's WebSocket
// from the host page, so the gateway sees (and checks) the host page's Origin.
(function () {
  var script = document.currentScript;
  if (!script || !script.getAttribute('data-bot')) return;
  var bot = script.getAttribute('data-bot');
  var token = script.getAttribute('data-token') || '';

  // The gateway is wherever this script came from (PUBLIC_URL may carry a path).
  var wsUrl = new URL('v1/bots/' + encodeURIComponent(bot) + '/ws', new URL('.', script.src));
  wsUrl.protocol = wsUrl.protocol === 'https:' ? 'wss:' : 'ws:';
  wsUrl.searchParams.set('token', token);

  var host = document.createElement('switchyard-chat');
  host.setAttribute('data-bot', bot);
  var shadow = host.attachShadow({ mode: 'open' });
  // Constructed style sheets are not inline <style>, so a host page's strict style-src allows them.
  if (shadow.adoptedStyleSheets && typeof CSSStyleSheet === 'function' && 'replaceSync' in CSSStyleSheet.prototype) {
    var sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
    shadow.adoptedStyleSheets = [sheet];
  } else {
    var style = document.createElement('style');
    style.textContent = CSS;
    shadow.appendChild(style);
  }

  var launcher = document.createElement('button');
  launcher.type = 'button';
  launcher.className = 'sy-launcher';
  launcher.setAttribute('data-testid', 'sy-launcher');
  launcher.setAttribute('aria-label', 'Open chat');
  launcher.setAttribute('aria-expanded', 'false');
  // Drawn, not a glyph: an emoji may be missing from the visitor's fonts.
  var icon = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  icon.setAttribute('viewBox', '0 0 24 24');
  icon.setAttribute('aria-hidden', 'true');
  var path = document.createElementNS('http://www.w3.org/2000/svg', 'path');
  path.setAttribute('d', 'M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z');
  icon.appendChild(path);
  launcher.appendChild(icon);
  var panel = document.createElement('div');
  panel.className = 'sy-panel';
  panel.setAttribute('data-testid', 'sy-panel');
  panel.hidden = true;
  shadow.appendChild(panel);
  shadow.appendChild(launcher);

  var chat = mountChat(panel, {
    wsUrl: wsUrl.href,
    refusedText: 'This site is not allowed to use this bot (the gateway refused the connection).',
  });

  function setOpen(open) {
    panel.hidden = !open;
    launcher.setAttribute('aria-expanded', String(open));
    launcher.setAttribute('aria-label', open ? 'Close chat' : 'Open chat');
    // Connecting waits for the first open: a page view alone costs the bot nothing.
    if (open) chat.start();
  }
  launcher.addEventListener('click', function () {
    setOpen(panel.hidden);
  });

  function attach() {
    document.body.appendChild(host);
  }
  if (document.body) attach();
  else document.addEventListener('DOMContentLoaded', attach);

  // A small, stable handle for the host page (and tests): open, close, send, state.
  var api = {
    bot: bot,
    element: host,
    open: function () {
      setOpen(true);
    },
    close: function () {
      setOpen(false);
    },
    send: chat.send,
    state: chat.state,
  };
  var registry = (window.SwitchyardChat = window.SwitchyardChat || { widgets: [] });
  registry.widgets.push(api);
})();
