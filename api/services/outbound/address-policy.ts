import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** 2000::/3, the only IPv6 block handed out as global unicast; everything outside it is denied. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * True when `ip` is an ordinary public unicast address.
 *
 * @remarks
 * Default-deny: an address passes only when ipaddr.js puts it in no special range. That
 * rules out loopback, private, link-local, CGNAT, multicast, unspecified, broadcast and the
 * reserved, benchmarking and documentation blocks, and on IPv6 every form that embeds an
 * IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) without decoding it: none of them is
 * needed to reach a public receiver, and decoding is where guards usually get it wrong. The
 * cost: a gateway on an IPv6-only network behind DNS64 cannot reach IPv4-only receivers.
 */
export function isPublicAddress(ip: Address): boolean {
  if (ip.kind() === 'ipv4') return ip.range() === 'unicast';
  return ip.match(GLOBAL_UNICAST_V6) && ip.range() === 'unicast';
}

/**
 * `address` parsed (any spelling ipaddr.js reads), and the same host as plain IPv4 when it is
 * written IPv4-mapped; null when it is not an IP literal.
 */
function parseAddress(address: string): { ip: Address; plain: Address } | null {
  try {
    const ip = ipaddr.parse(address);
    return { ip, plain: ip instanceof ipaddr.IPv6 && ip.isIPv4MappedAddress() ? ip.toIPv4Address() : ip };
  } catch {
    return null;
  }
}

/** True when `address` (an IP literal) is loopback: 127.0.0.0/8, ::1, or 127.x written IPv4-mapped. */
export function isLoopbackAddress(address: string): boolean {
  return parseAddress(address)?.plain.range() === 'loopback';
}

/**
 * Which addresses outbound calls may connect to: public unicast ones, plus the ranges the
 * operator exempted (`OUTBOUND_ALLOW_CIDRS`).
 */
export class AddressPolicy {
  private readonly exempt: [Address, number][];

  /** @param allowCidrs - ranges such as `10.1.0.0/16`, already validated by the config loader. */
  constructor(allowCidrs: readonly string[]) {
    this.exempt = allowCidrs.map((cidr) => ipaddr.parseCIDR(cidr));
  }

  /** True when `address` (an IP literal in any spelling ipaddr.js parses) may be connected to. */
  allows(address: string): boolean {
    const parsed = parseAddress(address);
    if (!parsed) return false;
    const { ip, plain } = parsed;
    // An exemption written as IPv4 also covers the IPv4-mapped spelling: both reach the same host.
    if (this.exempt.some(([net, bits]) => net.kind() === plain.kind() && plain.match(net, bits))) return true;
    return isPublicAddress(ip);
  }
}

/**
 * Every address `host` (a name, not a literal) resolves to, both families.
 *
 * @remarks
 * `localhost` and `*.localhost` are loopback by definition (RFC 6761) and are answered here,
 * not by the resolver: the system resolver does not know `localhost.`, and a resolver that
 * maps them elsewhere must not make registration and connection disagree.
 */
export async function resolveHost(host: string): Promise<string[]> {
  const name = host.toLowerCase().replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return ['127.0.0.1', '::1'];
  const answers = await lookup(host, { all: true });
  return answers.map((a) => a.address);
}
