/**
 * Where callers and workers reach this gateway: the base of every link it hands out (Location,
 * lease upload URLs, artifact URLs, bot pages). PUBLIC_URL when set; with PORT=0 and no
 * PUBLIC_URL the port is known only once the server listens, so the listener settles it then.
 */
export class PublicUrl {
  private url: string;

  constructor(configured: string) {
    this.url = configured;
  }

  readonly get = (): string => this.url;

  /** Called once by the HTTP listener with the address it bound: only a `:0` placeholder is replaced. */
  settle(bound: string): void {
    if (this.url.endsWith(':0')) this.url = bound;
  }
}
