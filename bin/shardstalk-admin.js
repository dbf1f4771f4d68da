#!/usr/bin/env node
// shardstalk-admin: runs the TypeScript entry directly (Node >= 24 strips the types), as bin/shardstalk.js.
import module from 'node:module';

module.enableCompileCache?.();
const { main } = await import('../src/admin/cli.ts');
process.exitCode = await main(process.argv.slice(2));
