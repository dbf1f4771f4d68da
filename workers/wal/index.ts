// The write-ahead log (beanstalkd's -b): see wal.ts for the per-shard Wal, reader.ts for replay
// and recovery, lock.ts for the directory lock, record.ts for the byte format.

export * from './record.ts';
export * from './segment.ts';
export * from './reader.ts';
export * from './lock.ts';
export * from './wal.ts';
export * from './io.ts';
