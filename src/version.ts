/** shardstalk's version (`-v`, stats `version`). */
export const VERSION = '0.1.0';
