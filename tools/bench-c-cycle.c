/*
 * bench-c-cycle: a C epoll generator for put → reserve → delete, closed loop or at a fixed rate.
 *
 * Why: the Node generator (bench/cli.ts) needs 14-19 µs of CPU per job and, on this 2-core VM,
 * shares the cores with the server it measures; at the points marked † in RESULTS.md it may set the
 * pace itself. This one is a single thread doing the least a client can per reply (one epoll_wait,
 * read and write, no allocation): ~10 µs of CPU per unpipelined command here, most of it the
 * kernel's loopback TCP path, which is charged to the sender; far less per job when pipelined. It
 * reports its own CPU (getrusage over the measured window) so each figure can be checked against it:
 * near 100% of a core, the figure is the generator's. bench/cycle-c.ts runs it side by side against
 * beanstalkd and shardstalk (`make bench-c`).
 *
 *   gcc -O2 -Wall -Wextra -o bench/out/bench-c-cycle tools/bench-c-cycle.c
 *   bench/out/bench-c-cycle [-w WARMUP_S] [-s] cycle PORT CONNECTIONS INFLIGHT SECONDS [TUBE]
 *   bench/out/bench-c-cycle [-w WARMUP_S] [-s] rate PORT PRODUCERS CONSUMERS JOBS_PER_SEC SECONDS [TUBE]
 *
 * cycle: each connection keeps INFLIGHT jobs going round `put` → `reserve-with-timeout 1` →
 *   `delete <the id reserved>` → next put; with INFLIGHT > 1 the commands are pipelined (replies
 *   come in order per connection, so a per-connection FIFO says which reply is next). Latency per
 *   command: send → its reply (put → INSERTED, reserve → RESERVED, delete → DELETED).
 * rate: PRODUCERS connections put JOBS_PER_SEC in all, each due at a fixed time from a timerfd
 *   whatever the replies do (open loop); the body starts with the due time (16 hex digits, ns of
 *   CLOCK_MONOTONIC). CONSUMERS connections loop `reserve` → `delete`. Latency = due time → RESERVED
 *   read by a consumer (from the due time, not the send time: no coordinated omission; `lag` says
 *   how late the generator itself sent). After the window, producers stop and the consumers drain
 *   every job put; then the sockets are closed.
 *
 * -s (spin): epoll_wait never sleeps, and a rate's puts are paced by the clock instead of a timerfd.
 *   Sleeping, each reply costs a wake-up, and at 20,000 jobs/s on this VM that left the generator
 *   with 5-15% of its core to spare, so a hiccup's backlog drained slowly and its tail was the
 *   generator's. Spinning, it always uses its whole core (put it on a core of its own); `busyShare`
 *   is the share of the window it spent on replies and puts, which is its load.
 * Both: all connections connect and set up (`use`, `watch`, `ignore default`) first; then WARMUP_S
 * (default 1) of load that is not counted, then SECONDS measured, then a drain (at most 10 s, not
 * measured): no new jobs, every outstanding reply awaited. Jobs, latencies, and CPU count only the
 * measured window. Output: one line of JSON on stdout. On stderr: `@window-start` and `@window-end`
 * as the window opens and closes (for a runner to sample the server's CPU), and any errors.
 * Histograms are log-linear (64 sub-buckets per power of two: within 0.8% at every percentile).
 * The fixed-rate latency also lists its non-empty buckets (`buckets`: [µs, count] pairs), so that
 * rounds can be pooled into one distribution.
 * Exit code 0; 1 if any error (TIMED_OUT, an unexpected reply, a closed connection, a job not
 * drained); 2 bad usage; 3 could not connect.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef uint64_t u64;

#define BODY 100
#define DRAIN_NS 10000000000ull
#define SETUP_NS 30000000000ull
#define MAX_PRINTED_ERRORS 20
#define TIMER_TAG UINT64_MAX

static u64 now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (u64)t.tv_sec * 1000000000ull + (u64)t.tv_nsec;
}

static double cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

/* ---- log-linear histogram of nanoseconds: exact below 64 ns, then 64 buckets per power of 2 ---- */

#define SUB_BITS 6
#define SUB (1 << SUB_BITS)
#define HBUCKETS (SUB * 40) /* up to 2^44 ns, ~4.9 h */

typedef struct {
  u64 n, max;
  u64 c[HBUCKETS];
} hist;

static int hidx(u64 v) {
  if (v < SUB) return (int)v;
  int e = 63 - __builtin_clzll(v);
  int i = (e - SUB_BITS + 1) * SUB + (int)((v >> (e - SUB_BITS)) & (SUB - 1));
  return i < HBUCKETS ? i : HBUCKETS - 1;
}

/* The middle of bucket i, in ns. */
static double hmid(int i) {
  if (i < SUB) return (double)i;
  int e = i / SUB + SUB_BITS - 1, sub = i % SUB;
  return (double)((u64)(SUB + sub) << (e - SUB_BITS)) + (double)(1ull << (e - SUB_BITS)) / 2.0;
}

static void hadd(hist *h, u64 v) {
  h->n++;
  h->c[hidx(v)]++;
  if (v > h->max) h->max = v;
}

/* The q-quantile in µs (the smallest value with at least q of the samples at or below it). */
static double hq(const hist *h, double q) {
  if (h->n == 0) return 0;
  u64 rank = (u64)(q * (double)h->n + 0.999999);
  if (rank < 1) rank = 1;
  u64 seen = 0;
  for (int i = 0; i < HBUCKETS; i++) {
    seen += h->c[i];
    if (seen >= rank) {
      double v = hmid(i);
      return (v > (double)h->max ? (double)h->max : v) / 1000.0;
    }
  }
  return (double)h->max / 1000.0;
}

static void hjson(const char *name, const hist *h, int with_tail) {
  if (h->n == 0) {
    printf("\"%s\":{\"n\":0}", name);
    return;
  }
  printf("\"%s\":{\"n\":%" PRIu64 ",\"p50us\":%.1f,\"p99us\":%.1f", name, h->n, hq(h, 0.5), hq(h, 0.99));
  if (with_tail) {
    printf(",\"p90us\":%.1f,\"p95us\":%.1f,\"p98us\":%.1f,\"p995us\":%.1f,\"p999us\":%.1f", hq(h, 0.9), hq(h, 0.95), hq(h, 0.98), hq(h, 0.995), hq(h, 0.999));
    /* The non-empty buckets ([middle in µs, count], the last one capped at the max as hq does), so
     * that a runner can pool rounds into one distribution. */
    printf(",\"buckets\":[");
    int first = 1;
    for (int i = 0; i < HBUCKETS; i++) {
      if (h->c[i] == 0) continue;
      double v = hmid(i);
      printf("%s[%.3f,%" PRIu64 "]", first ? "" : ",", (v > (double)h->max ? (double)h->max : v) / 1000.0, h->c[i]);
      first = 0;
    }
    putchar(']');
  }
  printf(",\"maxUs\":%.1f}", (double)h->max / 1000.0);
}

/* ---- connections ---- */

enum { X_USING, X_WATCHING, X_PUT, X_RESERVE, X_DELETE };
static const char *XNAME[] = {"USING", "WATCHING", "INSERTED", "RESERVED", "DELETED"};
enum { ROLE_CYCLE, ROLE_PRODUCER, ROLE_CONSUMER };
enum { PH_SETUP, PH_WARM, PH_MEASURE, PH_DRAIN, PH_DONE };

typedef struct {
  u64 sent; /* when the command was written (0 until then) */
  int kind;
} pend;

typedef struct {
  int fd, idx, role, dead, out_armed;
  char *rb;
  size_t rlen, rcap;
  char *wb;
  size_t woff, wlen, wcap;
  pend *q; /* ring of expected replies, in order */
  unsigned qcap, qhead, qn, qunsent;
  int setup_left;
} conn;

static conn *conns;
static int nconns, ep, timer_fd = -1, phase = PH_SETUP;
static int spin; /* -s: poll without sleeping (epoll_wait with no timeout), puts paced by the clock */
static u64 ws_ns, we_ns; /* the measured window */
static u64 outstanding;  /* replies awaited, all connections */
static u64 errors, timed_out, setup_left;
static hist h_put, h_res, h_del, h_e2e, h_lag;
/* cycle */
static int inflight;
static u64 jobs_window, jobs_total;
/* rate */
static u64 puts_sent, puts_inserted, reserved_total, jobs_reserved_window, puts_sent_window;
static int live_producers;
static char put_tail[BODY + 3];

static void error_at(conn *c, const char *what, const char *got, size_t got_len) {
  errors++;
  if (errors <= MAX_PRINTED_ERRORS) {
    while (got_len && (got[got_len - 1] == '\n' || got[got_len - 1] == '\r')) got_len--;
    if (c) fprintf(stderr, "bench-c-cycle: connection %d: %s", c->idx, what);
    else fprintf(stderr, "bench-c-cycle: %s", what);
    if (got_len) fprintf(stderr, " \"%.*s\"", (int)(got_len > 200 ? 200 : got_len), got);
    fputc('\n', stderr);
  } else if (errors == MAX_PRINTED_ERRORS + 1) {
    fprintf(stderr, "bench-c-cycle: more errors (not printed)\n");
  }
}

static void *xrealloc(void *p, size_t n) {
  p = realloc(p, n);
  if (!p) {
    perror("realloc");
    exit(4);
  }
  return p;
}

static void wput(conn *c, const char *s, size_t n) {
  if (c->wlen + n > c->wcap) {
    if (c->woff) {
      memmove(c->wb, c->wb + c->woff, c->wlen - c->woff);
      c->wlen -= c->woff;
      c->woff = 0;
    }
    while (c->wlen + n > c->wcap) c->wcap *= 2;
    c->wb = xrealloc(c->wb, c->wcap);
  }
  memcpy(c->wb + c->wlen, s, n);
  c->wlen += n;
}

/* Queue a command and the reply it awaits. */
static void send_cmd(conn *c, int kind, const char *s, size_t n) {
  if (c->qn == c->qcap) {
    unsigned nc = c->qcap * 2;
    pend *q = xrealloc(NULL, nc * sizeof *q);
    for (unsigned i = 0; i < c->qn; i++) q[i] = c->q[(c->qhead + i) & (c->qcap - 1)];
    free(c->q);
    c->q = q;
    c->qhead = 0;
    c->qcap = nc;
  }
  c->q[(c->qhead + c->qn) & (c->qcap - 1)] = (pend){0, kind};
  c->qn++;
  c->qunsent++;
  outstanding++;
  wput(c, s, n);
}

static void set_out(conn *c, int on) {
  if (c->out_armed == on) return;
  struct epoll_event e = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.u64 = (u64)c->idx};
  epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
  c->out_armed = on;
}

static void kill_conn(conn *c, const char *why) {
  if (c->dead) return;
  error_at(c, why, "", 0);
  c->dead = 1;
  if (c->role == ROLE_PRODUCER) live_producers--;
  outstanding -= c->qn;
  if (c->setup_left) setup_left -= (u64)c->setup_left;
  c->qn = 0;
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
}

/* Writes what is queued; the commands not yet stamped get the time just before the write. */
static void flush(conn *c) {
  if (c->dead || c->woff == c->wlen) return;
  if (c->qunsent) {
    u64 t = now_ns();
    for (unsigned i = c->qn - c->qunsent; i < c->qn; i++) c->q[(c->qhead + i) & (c->qcap - 1)].sent = t;
    c->qunsent = 0;
  }
  while (c->woff < c->wlen) {
    ssize_t w = write(c->fd, c->wb + c->woff, c->wlen - c->woff);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      kill_conn(c, strerror(errno));
      return;
    }
    c->woff += (size_t)w;
  }
  if (c->woff == c->wlen) c->woff = c->wlen = 0;
  set_out(c, c->woff != c->wlen);
}

static void cmd_put_cycle(conn *c) {
  static char cmd[32 + BODY + 2];
  static size_t len;
  if (!len) {
    len = (size_t)sprintf(cmd, "put 0 0 60 %d\r\n", BODY);
    memset(cmd + len, 'x', BODY);
    len += BODY;
    cmd[len++] = '\r';
    cmd[len++] = '\n';
  }
  send_cmd(c, X_PUT, cmd, len);
}

static void cmd_reserve(conn *c) {
  if (c->role == ROLE_CYCLE) send_cmd(c, X_RESERVE, "reserve-with-timeout 1\r\n", 24);
  else send_cmd(c, X_RESERVE, "reserve\r\n", 9);
}

static void cmd_delete(conn *c, u64 id) {
  char b[48];
  int n = snprintf(b, sizeof b, "delete %" PRIu64 "\r\n", id);
  send_cmd(c, X_DELETE, b, (size_t)n);
}

static void cmd_put_stamped(conn *c, u64 due) {
  static const char hex[] = "0123456789abcdef";
  char b[32 + BODY + 2];
  int n = sprintf(b, "put 0 0 60 %d\r\n", BODY);
  for (int i = 15; i >= 0; i--) b[n + 15 - i] = hex[(due >> (i * 4)) & 15];
  memcpy(b + n + 16, put_tail, BODY - 16 + 2);
  send_cmd(c, X_PUT, b, (size_t)n + BODY + 2);
}

static int parse_u64(const char *s, const char *end, u64 *out, const char **next) {
  u64 v = 0;
  const char *p = s;
  while (p < end && *p >= '0' && *p <= '9') v = v * 10 + (u64)(*p++ - '0');
  if (p == s) return 0;
  *out = v;
  if (next) *next = p;
  return 1;
}

static int starts(const char *line, size_t n, const char *word) {
  size_t k = strlen(word);
  return n >= k && memcmp(line, word, k) == 0;
}

/* One whole reply: `line` (with its CRLF), and for RESERVED its body. `t` is when it was read. */
static void on_reply(conn *c, const char *line, size_t n, const char *body, u64 t) {
  if (c->qn == 0) {
    error_at(c, "reply with no command outstanding:", line, n);
    return;
  }
  pend p = c->q[c->qhead];
  c->qhead = (c->qhead + 1) & (c->qcap - 1);
  c->qn--;
  outstanding--;
  int measure = phase == PH_MEASURE && p.sent >= ws_ns;
  /* `t` is when this batch's epoll_wait returned. A put sent after that (the batch's timer event
     came first) can have its reply read later in the same batch, when its connection's event,
     reported for an earlier reply, is handled: time such a reply now, not before its command was
     sent (its latency wrapped around; 12 of 120,000 puts in one run at 20,000 jobs/s). */
  if (t < p.sent) t = now_ns();
  u64 lat = t - p.sent;
  const char *end = line + n;
  switch (p.kind) {
  case X_USING:
  case X_WATCHING:
    if (!starts(line, n, XNAME[p.kind])) error_at(c, p.kind == X_USING ? "use: got" : "watch/ignore: got", line, n);
    c->setup_left--;
    setup_left--;
    return;
  case X_PUT: {
    u64 id;
    if (!starts(line, n, "INSERTED ") || !parse_u64(line + 9, end, &id, NULL)) {
      error_at(c, "put: got", line, n);
      if (c->role == ROLE_CYCLE && phase < PH_DRAIN) cmd_put_cycle(c);
      return;
    }
    if (measure) hadd(&h_put, lat);
    if (c->role == ROLE_CYCLE) cmd_reserve(c);
    else puts_inserted++;
    return;
  }
  case X_RESERVE: {
    u64 id;
    if (!starts(line, n, "RESERVED ") || !parse_u64(line + 9, end, &id, NULL)) {
      if (starts(line, n, "TIMED_OUT")) timed_out++;
      error_at(c, "reserve: got", line, n);
      /* The job is still in the tube (or was never put): ask again, until the drain gives up. */
      cmd_reserve(c);
      return;
    }
    if (c->role == ROLE_CYCLE) {
      if (measure) hadd(&h_res, lat);
    } else {
      reserved_total++;
      if (phase == PH_MEASURE) jobs_reserved_window++;
      u64 due = 0;
      int ok = 1;
      for (int i = 0; i < 16; i++) {
        char ch = body[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0) ok = 0;
        due = due << 4 | (u64)(d & 15);
      }
      if (!ok) error_at(c, "reserved a job this run did not put:", body, 16);
      else if (due >= ws_ns && due < we_ns) hadd(&h_e2e, t > due ? t - due : 0);
    }
    cmd_delete(c, id);
    return;
  }
  case X_DELETE:
    if (!starts(line, n, "DELETED")) error_at(c, "delete: got", line, n);
    if (measure) hadd(&h_del, lat);
    if (c->role == ROLE_CYCLE) {
      jobs_total++;
      if (phase == PH_MEASURE) jobs_window++;
      if (phase < PH_DRAIN) cmd_put_cycle(c);
    } else {
      cmd_reserve(c);
    }
    return;
  }
}

static void on_readable(conn *c, u64 t) {
  if (c->rcap - c->rlen < 4096) {
    c->rcap *= 2;
    c->rb = xrealloc(c->rb, c->rcap);
  }
  ssize_t r = read(c->fd, c->rb + c->rlen, c->rcap - c->rlen);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (r <= 0) {
    kill_conn(c, r == 0 ? "the server closed the connection" : strerror(errno));
    return;
  }
  c->rlen += (size_t)r;
  size_t pos = 0;
  for (;;) {
    char *line = c->rb + pos;
    char *nl = memchr(line, '\n', c->rlen - pos);
    if (!nl) break;
    size_t n = (size_t)(nl - line) + 1, whole = n;
    const char *body = NULL;
    if (starts(line, n, "RESERVED ")) {
      const char *p;
      u64 id, bytes;
      if (!parse_u64(line + 9, nl, &id, &p) || *p != ' ' || !parse_u64(p + 1, nl, &bytes, NULL)) {
        error_at(c, "garbled reply:", line, n);
        kill_conn(c, "giving up on this connection");
        return;
      }
      whole = n + bytes + 2;
      if (c->rlen - pos < whole) {
        if (whole > c->rcap) {
          /* Room for the whole body; the unparsed part moves to the front below. */
          c->rcap = whole + 4096;
          c->rb = xrealloc(c->rb, c->rcap);
        }
        break;
      }
      body = line + n;
      if (bytes < 16 && c->role == ROLE_CONSUMER) {
        error_at(c, "reserved a job this run did not put:", line, n);
        body = "----------------";
      }
    }
    on_reply(c, line, n, body, t);
    if (c->dead) return;
    pos += whole;
  }
  if (pos) {
    memmove(c->rb, c->rb + pos, c->rlen - pos);
    c->rlen -= pos;
  }
  flush(c);
}

static void arm_timer(u64 at) {
  struct itimerspec its = {0};
  its.it_value.tv_sec = (time_t)(at / 1000000000ull);
  its.it_value.tv_nsec = (long)(at % 1000000000ull);
  if (at == 0) its.it_value.tv_nsec = 0; /* disarm */
  timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* The rate's pacing: put k is due at pace_t0 + k / pace_per_ns. */
static u64 pace_t0, pace_k;
static double pace_per_ns;
static int pace_producers, pace_next;

/* Sends every put due by now, round-robin over the producers, stamped with its due time; at most
   1000 at once, so that replies are still read when the generator falls behind. Without -s, arms
   the timer for the next one. */
static int send_due_puts(u64 t) {
  int sent = 0;
  for (int burst = 0;; burst++) {
    u64 due = pace_t0 + (u64)((double)pace_k / pace_per_ns);
    if (due > t || burst == 1000) {
      if (!spin) arm_timer(due > t ? due : t);
      break;
    }
    conn *c = &conns[pace_next];
    pace_next = (pace_next + 1) % pace_producers;
    if (c->dead) {
      if (live_producers == 0) break;
      continue;
    }
    cmd_put_stamped(c, due);
    flush(c);
    puts_sent++;
    sent++;
    if (phase == PH_MEASURE && due >= ws_ns) {
      puts_sent_window++;
      hadd(&h_lag, t - due);
    }
    pace_k++;
    t = now_ns();
  }
  return sent;
}

static int usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [-w WARMUP_S] [-s] cycle PORT CONNECTIONS INFLIGHT SECONDS [TUBE]\n"
          "       %s [-w WARMUP_S] [-s] rate PORT PRODUCERS CONSUMERS JOBS_PER_SEC SECONDS [TUBE]\n",
          argv0, argv0);
  return 2;
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  double warmup_s = 1;
  int opt;
  while ((opt = getopt(argc, argv, "+w:s")) != -1) {
    if (opt == 'w') warmup_s = atof(optarg);
    else if (opt == 's') spin = 1;
    else return usage(prog);
  }
  argv += optind;
  argc -= optind;
  if (argc < 1) return usage(prog);
  int rate_mode = strcmp(argv[0], "rate") == 0;
  if (!rate_mode && strcmp(argv[0], "cycle") != 0) return usage(prog);
  if (argc < (rate_mode ? 6 : 5)) return usage(prog);
  int port = atoi(argv[1]), producers = 0, consumers = 0;
  double per_sec = 0, seconds;
  const char *tube;
  if (rate_mode) {
    producers = atoi(argv[2]);
    consumers = atoi(argv[3]);
    per_sec = atof(argv[4]);
    seconds = atof(argv[5]);
    tube = argc > 6 ? argv[6] : "bench";
    nconns = producers + consumers;
    if (producers < 1 || consumers < 1 || per_sec <= 0) return usage(prog);
  } else {
    nconns = atoi(argv[2]);
    inflight = atoi(argv[3]);
    seconds = atof(argv[4]);
    tube = argc > 5 ? argv[5] : "bench";
    if (nconns < 1 || inflight < 1) return usage(prog);
  }
  if (port <= 0 || seconds <= 0 || warmup_s < 0 || strlen(tube) > 200) return usage(prog);

  /* 1000 connections need more descriptors than the usual soft limit of 1024 allows with margin. */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max && rl.rlim_cur < (rlim_t)nconns + 16) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)nconns + 16) {
    fprintf(stderr, "bench-c-cycle: %d connections need more descriptors than RLIMIT_NOFILE (%llu)\n", nconns, (unsigned long long)rl.rlim_cur);
    return 2;
  }

  memset(put_tail, 'x', BODY - 16);
  put_tail[BODY - 16] = '\r';
  put_tail[BODY - 16 + 1] = '\n';

  ep = epoll_create1(0);
  conns = calloc((size_t)nconns, sizeof *conns);
  char setup[700];
  int one = 1;
  for (int i = 0; i < nconns; i++) {
    conn *c = &conns[i];
    c->idx = i;
    c->role = rate_mode ? (i < producers ? ROLE_PRODUCER : ROLE_CONSUMER) : ROLE_CYCLE;
    live_producers += c->role == ROLE_PRODUCER;
    c->rcap = 8192;
    c->rb = xrealloc(NULL, c->rcap);
    c->wcap = 4096;
    c->wb = xrealloc(NULL, c->wcap);
    c->qcap = 8;
    while (c->qcap < (unsigned)inflight + 4) c->qcap *= 2;
    c->q = xrealloc(NULL, c->qcap * sizeof *c->q);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a)) {
      fprintf(stderr, "bench-c-cycle: connection %d to 127.0.0.1:%d: %s\n", i, port, strerror(errno));
      return 3;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = (u64)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e);
    /* Producers only `use`; consumers only `watch`; cycle connections both. */
    if (c->role != ROLE_CONSUMER) {
      int n = snprintf(setup, sizeof setup, "use %s\r\n", tube);
      send_cmd(c, X_USING, setup, (size_t)n);
      c->setup_left++;
    }
    if (c->role != ROLE_PRODUCER) {
      int n = snprintf(setup, sizeof setup, "watch %s\r\n", tube);
      send_cmd(c, X_WATCHING, setup, (size_t)n);
      c->setup_left++;
      if (strcmp(tube, "default") != 0) {
        send_cmd(c, X_WATCHING, "ignore default\r\n", 16);
        c->setup_left++;
      }
    }
    setup_left += (u64)c->setup_left;
    flush(c);
  }
  if (rate_mode && !spin) {
    timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = TIMER_TAG};
    epoll_ctl(ep, EPOLL_CTL_ADD, timer_fd, &e);
  }

  u64 t0 = 0, drain_until = 0, setup_until = now_ns() + SETUP_NS, busy_ns = 0;
  u64 warm_ns = (u64)(warmup_s * 1e9), measure_ns = (u64)(seconds * 1e9);
  double cpu_start = 0, cpu_end = 0;
  pace_per_ns = per_sec / 1e9;
  pace_producers = producers;
  ws_ns = we_ns = UINT64_MAX;
  struct epoll_event evs[512];
  while (phase != PH_DONE) {
    u64 t = now_ns();
    /* Phase changes, at the time they are seen. */
    if (phase == PH_SETUP && setup_left == 0) {
      phase = PH_WARM;
      t0 = pace_t0 = t;
      if (rate_mode) {
        if (!spin) arm_timer(t0);
        for (int i = producers; i < nconns; i++) {
          if (conns[i].dead) continue;
          cmd_reserve(&conns[i]);
          flush(&conns[i]);
        }
      } else
        for (int i = 0; i < nconns; i++) {
          if (conns[i].dead) continue;
          for (int j = 0; j < inflight; j++) cmd_put_cycle(&conns[i]);
          flush(&conns[i]);
        }
    } else if (phase == PH_SETUP && t > setup_until) {
      error_at(NULL, "set-up replies still missing after 30 s", "", 0);
      break;
    }
    if (phase == PH_WARM && t >= t0 + warm_ns) {
      phase = PH_MEASURE;
      ws_ns = t;
      cpu_start = cpu_s();
      fputs("@window-start\n", stderr);
    }
    if (phase == PH_MEASURE && t >= ws_ns + measure_ns) {
      phase = PH_DRAIN;
      we_ns = t;
      cpu_end = cpu_s();
      fputs("@window-end\n", stderr);
      drain_until = t + DRAIN_NS;
      if (rate_mode && !spin) arm_timer(0);
    }
    if (phase == PH_DRAIN) {
      int drained = outstanding == 0;
      if (rate_mode) {
        /* Every put answered, every job reserved and deleted: what is left is one reserve per consumer. */
        drained = reserved_total >= puts_inserted;
        for (int i = 0; i < nconns && drained; i++) {
          conn *c = &conns[i];
          if (c->dead) continue;
          drained = c->role == ROLE_PRODUCER ? c->qn == 0 : c->qn == 1 && c->q[c->qhead].kind == X_RESERVE;
        }
      }
      if (drained) break;
      if (t > drain_until) {
        char what[160];
        snprintf(what, sizeof what, "drain: after 10 s, %" PRIu64 " replies outstanding, %" PRIu64 " jobs put and not reserved", outstanding,
                 rate_mode && puts_inserted > reserved_total ? puts_inserted - reserved_total : 0);
        error_at(NULL, what, "", 0);
        break;
      }
    }
    u64 next = phase == PH_WARM ? t0 + warm_ns : phase == PH_MEASURE ? ws_ns + measure_ns : t + 100000000ull;
    int timeout_ms = next > t ? (int)((next - t + 999999) / 1000000) : 0;
    if (timeout_ms > 100) timeout_ms = 100;
    int n = epoll_wait(ep, evs, 512, spin ? 0 : timeout_ms);
    if (n < 0 && errno != EINTR) {
      perror("epoll_wait");
      return 4;
    }
    t = now_ns();
    for (int i = 0; i < n; i++) {
      if (evs[i].data.u64 == TIMER_TAG) {
        u64 ticks;
        if (read(timer_fd, &ticks, sizeof ticks) < 0 && errno != EAGAIN) perror("timerfd");
        if (phase != PH_WARM && phase != PH_MEASURE) continue;
        send_due_puts(t);
        continue;
      }
      conn *c = &conns[evs[i].data.u64];
      if (c->dead) continue;
      if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(c, t);
      if (!c->dead && (evs[i].events & EPOLLOUT)) flush(c);
    }
    /* Spinning, the puts are paced by the clock itself, and the time spent on replies and puts
       (not on empty polls) is the generator's load. */
    int sent = spin && rate_mode && (phase == PH_WARM || phase == PH_MEASURE) ? send_due_puts(now_ns()) : 0;
    if (spin && phase == PH_MEASURE && (n > 0 || sent > 0)) busy_ns += now_ns() - t;
  }
  if (phase < PH_DRAIN) {
    /* Ended early (set-up failed): no window. */
    we_ns = now_ns();
    cpu_end = cpu_start = cpu_s();
    if (ws_ns > we_ns) ws_ns = we_ns;
  }
  double cpu_total = cpu_s();
  for (int i = 0; i < nconns; i++)
    if (!conns[i].dead) close(conns[i].fd);

  double wall = (double)(we_ns - ws_ns) / 1e9;
  if (rate_mode) {
    printf("{\"mode\":\"rate\",\"port\":%d,\"tube\":\"%s\",\"producers\":%d,\"consumers\":%d,\"offeredPerSec\":%.0f,\"warmupSec\":%.3f,"
           "\"wallSec\":%.4f,\"putsSent\":%" PRIu64 ",\"putsPerSec\":%.1f,\"jobs\":%" PRIu64 ",\"jobsPerSec\":%.1f,",
           port, tube, producers, consumers, per_sec, warmup_s, wall, puts_sent_window, wall > 0 ? (double)puts_sent_window / wall : 0,
           jobs_reserved_window, wall > 0 ? (double)jobs_reserved_window / wall : 0);
    hjson("latency", &h_e2e, 1);
    putchar(',');
    hjson("put", &h_put, 0);
    putchar(',');
    hjson("delete", &h_del, 0);
    putchar(',');
    hjson("lag", &h_lag, 1);
    printf(",\"putsTotal\":%" PRIu64 ",\"reservedTotal\":%" PRIu64 ",", puts_inserted, reserved_total);
  } else {
    printf("{\"mode\":\"cycle\",\"port\":%d,\"tube\":\"%s\",\"conns\":%d,\"inflight\":%d,\"warmupSec\":%.3f,\"wallSec\":%.4f,\"jobs\":%" PRIu64
           ",\"jobsPerSec\":%.1f,",
           port, tube, nconns, inflight, warmup_s, wall, jobs_window, wall > 0 ? (double)jobs_window / wall : 0);
    hjson("put", &h_put, 0);
    putchar(',');
    hjson("reserve", &h_res, 0);
    putchar(',');
    hjson("delete", &h_del, 0);
    printf(",\"jobsTotal\":%" PRIu64 ",", jobs_total);
  }
  if (spin) printf("\"spin\":true,\"busyShare\":%.3f,", wall > 0 ? (double)busy_ns / 1e9 / wall : 0);
  printf("\"errors\":%" PRIu64 ",\"timedOut\":%" PRIu64 ",\"cpuSec\":%.3f,\"cpuShare\":%.3f,\"cpuTotalSec\":%.3f}\n", errors, timed_out,
         cpu_end - cpu_start, wall > 0 ? (cpu_end - cpu_start) / wall : 0, cpu_total);
  return errors ? 1 : 0;
}
