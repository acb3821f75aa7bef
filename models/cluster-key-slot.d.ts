/** cluster-key-slot (ioredis's own dependency) ships no types: the Redis Cluster slot of a key (CRC16 mod 16384, by its hash tag if it has one). */
declare module 'cluster-key-slot' {
  export default function calculateSlot(key: string): number;
}
