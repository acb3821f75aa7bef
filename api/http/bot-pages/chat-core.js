// The chat UI shared by the gateway's chat page and the embeddable widget: plain browser
// JavaScript (no build step), concatenated into both scripts by assets.ts. Every text from the
// bot or the user goes in through textContent, never as HTML.
//
// mountChat(root, {wsUrl, name?, refusedText}) builds the chat in `root` (an element, or an
// element inside a shadow root) and returns {start, send, state}. It connects on start():
// the bot socket says `hello` (greeting), then for each message `conversation`, `step`s,
// `delta`s (streamed into one reply bubble) and `reply`, or `error`.
function mountChat(root, opts) {
  var ws = null;
  var state = 'idle';
  var opened = false;
  var greeted = false;
  var conversationId = null;
  var replyBubble = null;
  var queued = null;

  function el(tag, cls, testid) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (testid) e.setAttribute('data-testid', testid);
    return e;
  }

  var box = el('div', 'sy-chat', 'sy-chat');
  var title = el('div', 'sy-title', 'sy-title');
  title.textContent = opts.name || 'Chat';
  var list = el('div', 'sy-messages', 'sy-messages');
  list.setAttribute('role', 'log');
  list.setAttribute('aria-live', 'polite');
  var status = el('div', 'sy-status', 'sy-status');
  status.setAttribute('role', 'status');
  var form = el('form', 'sy-form');
  var input = el('input', 'sy-input', 'sy-input');
  input.type = 'text';
  input.autocomplete = 'off';
  input.maxLength = 4000;
  input.placeholder = 'Type a message';
  input.setAttribute('aria-label', 'Message');
  var sendButton = el('button', 'sy-send', 'sy-send');
  sendButton.type = 'submit';
  sendButton.textContent = 'Send';
  form.appendChild(input);
  form.appendChild(sendButton);
  box.appendChild(title);
  box.appendChild(list);
  box.appendChild(status);
  box.appendChild(form);
  root.appendChild(box);

  function setState(next, text) {
    state = next;
    box.setAttribute('data-state', next);
    status.textContent = text || '';
    // Refused is final (a bad origin or token stays bad); while busy one turn is in flight.
    var locked = next === 'refused' || next === 'busy';
    input.disabled = locked;
    sendButton.disabled = locked;
  }

  function bubble(role, text, testid) {
    var b = el('div', 'sy-msg sy-' + role, testid);
    b.setAttribute('data-role', role);
    b.textContent = text;
    list.appendChild(b);
    list.scrollTop = list.scrollHeight;
    return b;
  }

  function endReply() {
    if (replyBubble && replyBubble.textContent === '') replyBubble.remove();
    else if (replyBubble) replyBubble.setAttribute('data-done', 'true');
    replyBubble = null;
  }

  function transmit(text) {
    var msg = { type: 'message', text: text };
    if (conversationId) msg.conversation_id = conversationId;
    ws.send(JSON.stringify(msg));
    setState('busy', 'Thinking…');
  }

  var handlers = {
    hello: function (m) {
      if (m.bot && typeof m.bot.name === 'string') title.textContent = m.bot.name;
      if (!greeted && typeof m.greeting === 'string' && m.greeting !== '') bubble('bot', m.greeting, 'sy-greeting');
      greeted = true;
      setState('ready');
      if (queued !== null) transmit(queued);
      queued = null;
    },
    conversation: function (m) {
      conversationId = m.conversation_id || conversationId;
    },
    step: function (m) {
      var tool = m.step && (m.step.tool || m.step.name);
      if (typeof tool === 'string') status.textContent = 'Using ' + tool + '…';
    },
    delta: function (m) {
      if (!replyBubble) replyBubble = bubble('bot', '', 'sy-reply');
      replyBubble.textContent += String(m.text || '');
      list.scrollTop = list.scrollHeight;
    },
    reply: function (m) {
      if (!replyBubble) replyBubble = bubble('bot', '', 'sy-reply');
      // The reply is the whole answer: it wins over whatever the deltas spelled.
      replyBubble.textContent = String(m.reply || '');
      conversationId = m.conversation_id || conversationId;
      endReply();
      setState('ready');
    },
    error: function (m) {
      endReply();
      bubble('error', String(m.message || 'Something went wrong.'), 'sy-error');
      setState('ready');
    },
  };

  function connect() {
    opened = false;
    setState('connecting', 'Connecting…');
    ws = new WebSocket(opts.wsUrl);
    ws.onopen = function () {
      opened = true;
    };
    ws.onmessage = function (ev) {
      var m;
      try {
        m = JSON.parse(ev.data);
      } catch (e) {
        return;
      }
      if (m && handlers.hasOwnProperty(m.type)) handlers[m.type](m);
    };
    ws.onclose = function () {
      ws = null;
      endReply();
      // A browser does not say why an upgrade failed; the gateway refuses a disallowed Origin
      // (403) or a bad token (401) there, so a socket that never opened was refused.
      if (!opened) setState('refused', opts.refusedText);
      else setState('closed', 'Disconnected. Send a message to reconnect.');
    };
  }

  function send(text) {
    text = String(text).trim();
    // One message at a time: a turn in flight, or one already waiting for the socket to open.
    if (text === '' || state === 'refused' || state === 'busy' || queued !== null) return false;
    bubble('user', text, 'sy-user');
    if (ws && state === 'ready') transmit(text);
    else {
      queued = text;
      if (!ws) connect();
    }
    return true;
  }

  form.addEventListener('submit', function (ev) {
    ev.preventDefault();
    if (send(input.value)) input.value = '';
  });
  setState('idle');

  return {
    start: function () {
      if (state === 'idle') connect();
      input.focus();
    },
    send: send,
    state: function () {
      return state;
    },
  };
}
