/*
 * The floor relay: the least a TCP relay can do on Linux, to measure how much of a
 * relayed request's CPU is the kernel's. One process, one edge-triggered epoll loop;
 * each accepted client gets a connection of its own to the backend, and every read
 * on either side is sent on to the other with one send. A send the other side does
 * not take whole keeps the rest in a fixed buffer and stops reading this side until
 * the other is writable again; the end of stream on either side closes the pair. No
 * timeouts, no limits beyond MAX_FDS, no half-close: not a relay to use.
 *
 *     cc -O2 -o /tmp/floor-relay benches/floor/relay.c
 *     taskset -c 0 /tmp/floor-relay PORT BACKEND_PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FDS 65536
#define BUF 65536

/* Per descriptor: its peer, and what it read that the peer has not taken yet. */
static int peer[MAX_FDS];
static char *held[MAX_FDS];
static size_t held_len[MAX_FDS];
static char buf[BUF];

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void pair_close(int ep, int fd) {
    int other = peer[fd];
    for (int i = 0; i < 2; i++) {
        int f = i ? other : fd;
        if (f < 0) continue;
        epoll_ctl(ep, EPOLL_CTL_DEL, f, NULL);
        close(f);
        free(held[f]);
        held[f] = NULL;
        held_len[f] = 0;
        peer[f] = -1;
    }
}

static void watch(int ep, int fd) {
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.fd = fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
}

/* Sends what `from` holds on to its peer; returns whether all of it went. */
static int flush_held(int from) {
    while (held_len[from] > 0) {
        ssize_t n = send(peer[from], held[from], held_len[from], MSG_NOSIGNAL);
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        memmove(held[from], held[from] + n, held_len[from] - n);
        held_len[from] -= n;
    }
    return 1;
}

/* Reads `fd` until it would block, sending each read on; returns -1 to close. */
static int relay(int fd) {
    int flushed = flush_held(fd);
    if (flushed <= 0) return flushed;
    for (;;) {
        ssize_t n = recv(fd, buf, BUF, 0);
        if (n == 0) return -1;
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        ssize_t sent = send(peer[fd], buf, n, MSG_NOSIGNAL);
        if (sent < 0 && errno != EAGAIN) return -1;
        if (sent < 0) sent = 0;
        if (sent < n) {
            if (!held[fd] && !(held[fd] = malloc(BUF))) die("malloc");
            memcpy(held[fd], buf + sent, n - sent);
            held_len[fd] = n - sent;
            return 0;
        }
        if (n < BUF) return 0;
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s PORT BACKEND_PORT\n", argv[0]);
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    struct sockaddr_in backend = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    addr.sin_addr.s_addr = backend.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 4096) < 0) die("listen");
    for (int i = 0; i < MAX_FDS; i++) peer[i] = -1;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = lfd}, events[1024];
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    for (;;) {
        int n = epoll_wait(ep, events, 1024, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    int b = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    if (c >= MAX_FDS || b >= MAX_FDS) die("too many descriptors");
                    if (connect(b, (struct sockaddr *)&backend, sizeof backend) < 0 && errno != EINPROGRESS) {
                        close(c);
                        close(b);
                        continue;
                    }
                    peer[c] = b;
                    peer[b] = c;
                    watch(ep, c);
                    watch(ep, b);
                }
                continue;
            }
            if (peer[fd] < 0) continue; /* closed earlier in this batch */
            /* Writable: what the other side held for this one can go now. */
            if ((events[i].events & EPOLLOUT) && relay(peer[fd]) < 0) {
                pair_close(ep, fd);
                continue;
            }
            if (peer[fd] >= 0 && (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) && relay(fd) < 0)
                pair_close(ep, fd);
        }
    }
}
