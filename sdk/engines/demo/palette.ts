import type { Rng } from './seed.js';

export type Rgb = [number, number, number];

/** Colour words a prompt may name, so "a red fox" really comes out reddish. */
const NAMED: Record<string, Rgb> = {
  red: [210, 40, 40],
  orange: [240, 140, 30],
  yellow: [240, 215, 50],
  green: [50, 170, 70],
  blue: [40, 90, 210],
  purple: [130, 60, 180],
  pink: [240, 130, 180],
  brown: [130, 85, 45],
  black: [25, 25, 30],
  white: [235, 235, 235],
  gray: [128, 128, 128],
  grey: [128, 128, 128],
  gold: [212, 175, 55],
  silver: [190, 190, 200],
};

function hsl(h: number, s: number, l: number): Rgb {
  const f = (n: number) => {
    const k = (n + h * 12) % 12;
    const c = l - s * Math.min(l, 1 - l) * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(c * 255);
  };
  return [f(0), f(8), f(4)];
}

/** Two colours for a picture: the first named colour in the text (if any) and a seeded companion. */
export function palette(text: string, rng: Rng): [Rgb, Rgb] {
  const word = text.toLowerCase().match(/[a-z]+/g)?.find((w) => w in NAMED);
  const hue = rng.next();
  const main = word ? NAMED[word] : hsl(hue, rng.range(0.5, 0.9), rng.range(0.35, 0.6));
  const accent = hsl((hue + 0.35 + rng.range(0, 0.3)) % 1, rng.range(0.4, 0.9), rng.range(0.3, 0.7));
  return [main, accent];
}

export function mix(a: Rgb, b: Rgb, t: number): Rgb {
  return [0, 1, 2].map((i) => Math.round(a[i] + (b[i] - a[i]) * t)) as Rgb;
}
