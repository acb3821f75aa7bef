/**
 * CSS of the chat page and the widget. The chat itself (`chatCss`) is shared; the widget adds
 * its launcher and panel, which live in a shadow root, and the page its full-height layout.
 */

export const chatCss = `
.sy-chat { display: flex; flex-direction: column; height: 100%; min-height: 0; box-sizing: border-box;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1a1a1a; background: #fff; text-align: left; }
.sy-title { padding: 12px 16px; font-weight: 600; border-bottom: 1px solid #e6e6e6; overflow-wrap: anywhere; }
.sy-messages { flex: 1; min-height: 0; overflow-y: auto; padding: 12px 16px; display: flex; flex-direction: column; gap: 8px; }
.sy-msg { max-width: 85%; padding: 8px 12px; border-radius: 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
.sy-bot { align-self: flex-start; background: #f1f3f5; }
.sy-user { align-self: flex-end; background: #1f5eff; color: #fff; }
.sy-error { align-self: stretch; max-width: none; background: #fdecea; color: #8a1c12; }
.sy-status { padding: 0 16px; min-height: 1.45em; font-size: 12px; color: #666; }
.sy-chat[data-state="refused"] .sy-status { margin: 12px 16px; padding: 8px 12px; border-radius: 8px; font-size: 14px; background: #fdecea; color: #8a1c12; }
.sy-form { display: flex; gap: 8px; padding: 12px; border-top: 1px solid #e6e6e6; }
.sy-input { flex: 1; min-width: 0; font: inherit; color: inherit; padding: 8px 10px; border: 1px solid #c8c8c8; border-radius: 8px; background: #fff; }
.sy-send { font: inherit; padding: 8px 14px; border: 0; border-radius: 8px; background: #1f5eff; color: #fff; cursor: pointer; }
.sy-input:disabled, .sy-send:disabled { opacity: 0.5; cursor: default; }
`;

export const widgetCss = `
:host { all: initial; }
.sy-launcher { position: fixed; right: 20px; bottom: 20px; z-index: 2147483000; width: 56px; height: 56px; margin: 0; padding: 0;
  border: 0; border-radius: 50%; background: #1f5eff; color: #fff; font: 24px/1 system-ui, sans-serif; cursor: pointer;
  box-shadow: 0 4px 14px rgba(0, 0, 0, 0.25); }
.sy-launcher svg { display: block; width: 26px; height: 26px; margin: auto; fill: currentColor; }
.sy-panel { position: fixed; right: 20px; bottom: 88px; z-index: 2147483000; width: min(360px, calc(100vw - 40px));
  height: min(520px, calc(100vh - 120px)); border-radius: 12px; overflow: hidden; box-shadow: 0 8px 30px rgba(0, 0, 0, 0.25); }
.sy-panel[hidden] { display: none; }
${chatCss}`;

export const pageCss = `
html, body { height: 100%; margin: 0; background: #f5f6f8; }
#sy-chat { max-width: 720px; height: 100%; margin: 0 auto; box-shadow: 0 0 24px rgba(0, 0, 0, 0.08); }
${chatCss}`;
