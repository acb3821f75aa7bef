import { render } from 'preact';
import { App } from './app.js';
import './styles/console.css';

/** The console's entry point (bundled by api/bin/build.mjs into dist/console/app.js). */
render(<App />, document.getElementById('app')!);
