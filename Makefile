# shardstalk: the two commands a fresh machine needs are `make run` and `make test`.
# Everything runs on the Node 24 that `npm ci` installs (the `node` devDependency), via npm/npx.

NPM ?= npm
ARGS ?=

# npm 11 leaves other platforms' optional msgpackr-extract builds out of the lock, and then
# `npm ci` refuses it; `npm install --no-save` installs the same versions without rewriting it.
node_modules: package.json package-lock.json
	$(NPM) ci || $(NPM) install --no-save
	@touch node_modules

.PHONY: run test typecheck bench bench-quick bench-durability bench-workq bench-c bench-threads bench-memory clean
run: node_modules
	npx node bin/shardstalk.js $(ARGS)

test: node_modules
	$(NPM) test

typecheck: node_modules
	npx tsc --noEmit -p .

clean:
	rm -rf bench/out

# Side by side with Debian's beanstalkd (about 40 min here); writes bench/RESULTS.md.
bench: node_modules
	node_modules/.bin/node bench/suite.ts

# A smoke run (about a minute); writes bench/out/RESULTS-quick.md only.
bench-quick: node_modules
	node_modules/.bin/node bench/suite.ts --quick

# The same with the write-ahead log on, at each fsync mode.
bench-durability: node_modules
	node_modules/.bin/node bench/durability.ts

# workq add / lease / complete on shardstalk's workq port (no reference workq server to compare with).
bench-workq: node_modules
	node_modules/.bin/node bench/suite.ts --protocol workq

# put → reserve → delete with the C generator (tools/bench-c-cycle.c), beanstalkd vs shardstalk, 5 rounds
# (about 8 min); prints a table, writes bench/out/cycle-c-<date>.json. ARGS='--quick', '--shards 2', ...
bench-c: node_modules
	node_modules/.bin/node bench/cycle-c.ts $(ARGS)

# The thread-count sweep: the same C-generator points against beanstalkd and against shardstalk
# with each shard count in THREADS, in both layouts: sN (--no-connection-threads: connections on the main thread, which
# also runs the first shard; each other shard on a thread of its own) and cN (--connection-threads:
# a thread per shard, each serving connections too). Each point runs on one tube and again over
# 16 tubes (one generator each, tube i on shard i mod N), where cN places connections on the thread
# of their tube. On a many-core host: make bench-threads THREADS="1 2 4 8 16".
# The side-by-side suite takes: node bench/suite.ts --shards 2,4,8,16.
THREADS ?= 1 2
THREAD_POINTS ?= c1x1,c10x1,c100x1,c1000x1,c100x16,c16x1t16,c160x1t16,c1600x1t16,c160x16t16,r10k,r20k
bench-threads: node_modules
	node_modules/.bin/node bench/cycle-c.ts --servers beanstalkd --points $(THREAD_POINTS) $(foreach t,$(THREADS),--variant 's$(t)=--shards $(t) --no-connection-threads' --variant 'c$(t)=--shards $(t) --connection-threads') $(ARGS)

# Memory side by side with beanstalkd (issue #15's points: idle, per idle connection, a drained
# burst, connection churn, tubes that come and go); about 6 min.
bench-memory: node_modules
	node_modules/.bin/node bench/memory.ts $(ARGS)
