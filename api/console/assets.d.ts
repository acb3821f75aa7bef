/** The stylesheet main.tsx imports: esbuild writes it beside the bundle (dist/console/app.css). */
declare module '*.css';
