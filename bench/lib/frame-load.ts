import type { FramePeer } from './frame-peers.js';

/**
 * Sends `count` copies of `frame` from `sender` as fast as its socket's back-pressure allows
 * (a new frame whenever less than `capBytes` waits in the socket) and resolves once `receiver`
 * has every one of them. What limits the rate is then the path between them: on the gateway's
 * path, its RANK_BUFFER_BYTES pause of the sender's socket.
 */
export function stream(sender: FramePeer, receiver: FramePeer, frame: Buffer, count: number, capBytes: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let sent = 0;
    let received = 0;
    let blocked = false;
    receiver.onFrame = (data) => {
      if (data.length !== frame.length) return reject(new Error(`a frame of ${data.length} bytes came where ${frame.length} were sent`));
      if (++received === count) resolve();
    };
    const written = (err?: Error) => {
      if (err) return reject(err);
      if (blocked && sender.ws.bufferedAmount < capBytes) pump();
    };
    const pump = () => {
      blocked = false;
      while (sent < count) {
        if (sender.ws.bufferedAmount >= capBytes) {
          blocked = true; // a write's callback resumes
          return;
        }
        sent++;
        sender.send(frame, written);
      }
    };
    pump();
  });
}

/**
 * `rounds` round trips one after another: `a` sends `frame`, `b` sends one of the same size back
 * the moment it has it, `a` times the round. Returns each round's time in µs.
 */
export function pingPong(a: FramePeer, b: FramePeer, frame: Buffer, rounds: number): Promise<Float64Array> {
  const back = Buffer.from(frame);
  const times = new Float64Array(rounds);
  return new Promise((resolve, reject) => {
    let i = 0;
    let t0 = 0;
    b.onFrame = () => b.send(back);
    a.onFrame = (data) => {
      if (data.length !== frame.length) return reject(new Error(`a frame of ${data.length} bytes came back where ${frame.length} were sent`));
      times[i] = (performance.now() - t0) * 1000;
      if (++i === rounds) return resolve(times);
      t0 = performance.now();
      a.send(frame);
    };
    t0 = performance.now();
    a.send(frame);
  });
}
