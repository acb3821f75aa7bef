// The gateway's chat page (GET /v1/bots/{id}/chat): the server renders #sy-chat with the bot's
// name and the socket URL in data attributes; this fills it and connects at once.
(function () {
  var root = document.getElementById('sy-chat');
  var chat = mountChat(root, {
    wsUrl: root.getAttribute('data-ws'),
    name: root.getAttribute('data-name'),
    refusedText: 'Could not connect to the bot. Reload the page to try again.',
  });
  chat.start();
  window.SwitchyardChat = { page: { send: chat.send, state: chat.state } };
})();
