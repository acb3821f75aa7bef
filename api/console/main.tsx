import { render } from 'preact';
import { App } from './app.js';
import './styles/console.css';

/** The console's entry point (bundled by api/bin/build.mjs into dist/console/app.js). */
const root = document.getElementById('app')!;
// The page's "Loading…" line goes: render() adds to what the element holds, it does not replace it.
root.replaceChildren();
render(<App />, root);
