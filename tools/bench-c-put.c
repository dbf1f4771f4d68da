/*
 * bench-c-put: a minimal C epoll put generator, to cross-check shardstalk-bench.
 *
 * Why: if a server looks slow under the Node generator, this answers "is it the generator?".
 * N connections keep P puts of 100 bytes in flight each for D seconds, counting INSERTED lines;
 * no latency, no verification: the least a generator can do per reply.
 *
 *   gcc -O2 -o bench/out/c-put tools/bench-c-put.c
 *   bench/out/c-put PORT CONNECTIONS PIPELINE SECONDS
 *   node_modules/.bin/node bench/cli.ts put -p PORT -c CONNECTIONS -P PIPELINE -d SECONDS
 *
 * On the 2-core VM (2026-11, beanstalkd 1.12, 100 × 16) both gave 60–83k puts/s side by side.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s PORT CONNECTIONS PIPELINE SECONDS\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[1]), conns = atoi(argv[2]), pipeline = atoi(argv[3]);
  double seconds = atof(argv[4]);
  char body[101];
  memset(body, 'x', 100);
  body[100] = 0;
  char cmd[256];
  int cmd_len = snprintf(cmd, sizeof cmd, "put 1024 0 120 100\r\n%s\r\n", body);
  char *burst = malloc((size_t)cmd_len * (size_t)pipeline);
  for (int i = 0; i < pipeline; i++) memcpy(burst + i * cmd_len, cmd, (size_t)cmd_len);
  int ep = epoll_create1(0), one = 1;
  for (int i = 0; i < conns; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
      perror("connect");
      return 3;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event e = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    if (write(fd, burst, (size_t)cmd_len * (size_t)pipeline) < 0) return 3;
  }
  long done = 0, reads = 0;
  double t0 = now(), end = t0 + seconds;
  static char buf[65536];
  struct epoll_event evs[256];
  while (now() < end) {
    int n = epoll_wait(ep, evs, 256, 100);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      ssize_t r = read(fd, buf, sizeof buf);
      if (r <= 0) continue;
      reads++;
      int replies = 0;
      for (ssize_t j = 0; j < r; j++) replies += buf[j] == '\n';
      done += replies;
      if (replies && write(fd, burst, (size_t)cmd_len * (size_t)replies) < 0) return 3;
    }
  }
  double elapsed = now() - t0;
  printf("c-put: %.0f jobs/s, %.2f replies/read\n", (double)done / elapsed, reads ? (double)done / (double)reads : 0.0);
  return 0;
}
