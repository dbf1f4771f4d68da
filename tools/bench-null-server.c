/*
 * bench-null-server: the cheapest server that speaks enough beanstalk for the load generator.
 *
 * Why: to measure the generator's own ceiling. Against this server (one epoll thread, one write
 * per read, a FIFO of job bodies, no tubes, no priorities, no timeouts) the generator, not the
 * server, should run out of CPU first; `shardstalk-bench` pointed at it shows how many jobs/s the
 * generator can drive on this machine, and so whether a real server measurement is
 * generator-bound.
 *
 * Commands: put, use, watch, ignore, reserve, reserve-with-timeout, delete, stats (pid only).
 * Every tube is the same FIFO. A blocking reserve waits for the next put however long it takes
 * (no timeouts), so use it for put, reserve and cycle runs, not mixed. delete always answers DELETED: the generator's ledger still checks
 * that each job came back exactly once, which a FIFO guarantees.
 *
 *   gcc -O2 -o bench/out/null-server tools/bench-null-server.c
 *   bench/out/null-server 11399        # listens on 127.0.0.1:11399
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define IN_CAP (1 << 20)
#define OUT_CAP (4 << 20)

typedef struct job {
  unsigned long long id;
  size_t len;
  struct job *next;
  char body[];
} job;

typedef struct conn {
  int fd;
  char *in;
  size_t in_len;
  char *out;
  size_t out_len;
  int waiting; /* a blocking reserve is parked: answered by the next put */
} conn;

static job *head, *tail;
static unsigned long long next_id = 1;
static conn **waiters;
static size_t n_waiters, cap_waiters;

static void out_append(conn *c, const char *s, size_t n) {
  if (c->out_len + n > OUT_CAP) { fprintf(stderr, "output buffer full\n"); exit(1); }
  memcpy(c->out + c->out_len, s, n);
  c->out_len += n;
}

static void out_str(conn *c, const char *s) { out_append(c, s, strlen(s)); }

static void flush_out(conn *c) {
  size_t off = 0;
  while (off < c->out_len) {
    ssize_t w = write(c->fd, c->out + off, c->out_len - off);
    if (w < 0) {
      if (errno == EAGAIN) { /* rare on loopback with our sizes: spin until the peer reads */ continue; }
      c->out_len = 0;
      return;
    }
    off += (size_t)w;
  }
  c->out_len = 0;
}

static void send_job(conn *c, job *j) {
  char hdr[64];
  int n = snprintf(hdr, sizeof hdr, "RESERVED %llu %zu\r\n", j->id, j->len);
  out_append(c, hdr, (size_t)n);
  out_append(c, j->body, j->len);
  out_append(c, "\r\n", 2);
  free(j);
}

static void process_later(conn *c);

/* Handles one complete command in c->in: 1 done, 0 more bytes needed, 2 parked in a reserve. */
static int handle_one(conn *c, size_t *pos) {
  char *start = c->in + *pos;
  size_t avail = c->in_len - *pos;
  char *lf = memchr(start, '\n', avail);
  if (!lf) return 0;
  size_t line = (size_t)(lf - start) + 1;
  char buf[64];
  if (!strncmp(start, "put ", 4)) {
    unsigned pri, delay, ttr;
    size_t bytes;
    if (sscanf(start, "put %u %u %u %zu", &pri, &delay, &ttr, &bytes) != 4) { out_str(c, "BAD_FORMAT\r\n"); *pos += line; return 1; }
    if (avail < line + bytes + 2) return 0;
    job *j = malloc(sizeof(job) + bytes);
    j->id = next_id++;
    j->len = bytes;
    j->next = NULL;
    memcpy(j->body, start + line, bytes);
    int n = snprintf(buf, sizeof buf, "INSERTED %llu\r\n", j->id);
    out_append(c, buf, (size_t)n);
    *pos += line + bytes + 2;
    if (n_waiters > 0) {
      conn *w = waiters[--n_waiters];
      w->waiting = 0;
      send_job(w, j);
      process_later(w);
    } else {
      if (tail) tail->next = j; else head = j;
      tail = j;
    }
    return 1;
  }
  if (!strncmp(start, "reserve", 7)) {
    int blocking = strncmp(start, "reserve-with-timeout 0\r", 23) != 0;
    *pos += line;
    if (head) {
      job *j = head;
      head = j->next;
      if (!head) tail = NULL;
      send_job(c, j);
    } else if (blocking) {
      if (n_waiters == cap_waiters) {
        cap_waiters = cap_waiters ? 2 * cap_waiters : 64;
        waiters = realloc(waiters, cap_waiters * sizeof *waiters);
      }
      waiters[n_waiters++] = c;
      c->waiting = 1;
      return 2; /* stop processing this connection until a job arrives */
    } else {
      out_str(c, "TIMED_OUT\r\n");
    }
    return 1;
  }
  *pos += line;
  if (!strncmp(start, "delete ", 7)) out_str(c, "DELETED\r\n");
  else if (!strncmp(start, "use ", 4)) { out_str(c, "USING "); out_append(c, start + 4, line - 4); }
  else if (!strncmp(start, "watch ", 6) || !strncmp(start, "ignore ", 7)) out_str(c, "WATCHING 1\r\n");
  else if (!strncmp(start, "stats\r", 6)) {
    char body[64];
    int bn = snprintf(body, sizeof body, "---\npid: %d\n", (int)getpid());
    int n = snprintf(buf, sizeof buf, "OK %d\r\n", bn);
    out_append(c, buf, (size_t)n);
    out_append(c, body, (size_t)bn);
    out_str(c, "\r\n");
  } else out_str(c, "UNKNOWN_COMMAND\r\n");
  return 1;
}

static void process(conn *c) {
  size_t pos = 0;
  while (!c->waiting) {
    int r = handle_one(c, &pos);
    if (r == 0 || r == 2) break;
  }
  memmove(c->in, c->in + pos, c->in_len - pos);
  c->in_len -= pos;
}

/* A parked connection woken by another's put: answer it, then run the commands it queued. */
static void process_later(conn *c) {
  process(c);
  flush_out(c);
}

int main(int argc, char **argv) {
  int port = argc > 1 ? atoi(argv[1]) : 11399;
  signal(SIGPIPE, SIG_IGN);
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4096)) { perror("bind/listen"); return 1; }
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    for (int i = 0; i < n; i++) {
      conn *c = evs[i].data.ptr;
      if (!c) {
        int fd;
        while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          conn *nc = calloc(1, sizeof *nc);
          nc->fd = fd;
          nc->in = malloc(IN_CAP);
          nc->out = malloc(OUT_CAP);
          struct epoll_event e = {.events = EPOLLIN, .data.ptr = nc};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
        }
        continue;
      }
      ssize_t r = read(c->fd, c->in + c->in_len, IN_CAP - c->in_len);
      if (r <= 0) {
        if (r < 0 && errno == EAGAIN) continue;
        for (size_t w = 0; w < n_waiters; w++)
          if (waiters[w] == c) waiters[w] = waiters[--n_waiters];
        close(c->fd);
        free(c->in);
        free(c->out);
        free(c);
        continue;
      }
      c->in_len += (size_t)r;
      if (!c->waiting) process(c);
      flush_out(c);
    }
  }
}
