/*
 * The floor client: the least a keep-alive load generator can do on Linux, to measure
 * how much of a response's CPU is the kernel's. N connections, DEPTH requests in flight
 * on each, sent in one write; an edge-triggered epoll loop reads what each ready
 * connection has and, once every ready one is read, sends the next DEPTH requests on
 * each connection whose requests were all answered, as percore bench and wrk do.
 * No parse and no timing. With DEPTH 1 (the default) each read is taken for one whole
 * response, which holds for small answers (nginx's or percore's hello). With a deeper
 * pipeline responses are counted by their ends: each head's empty line, found by a
 * four-state matcher that carries over from one read to the next, so a response split
 * across reads is counted once (the hello bodies hold no empty line). Prints the
 * responses counted and the seconds they took; a connection that fails is said on
 * stderr and not replaced.
 *
 * With a RATE (requests per second, DEPTH 1), each connection sends its next request
 * once answered and due, as percore bench --rate does: connection k's first request
 * is due k intervals / CONNECTIONS after the start, the loop sleeps until the next
 * 1 ms tick, and a request due within the tick leaves at its start. It measures
 * what a client at a fixed rate must pay the kernel (its sleeps and wake-ups), with
 * no latency taken.
 *
 *     cc -O2 -o /tmp/floor-client benches/floor/client.c
 *     taskset -c 1 /tmp/floor-client PORT CONNECTIONS SECONDS [DEPTH [RATE]]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char REQUEST[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
#define MAX_DEPTH 64
#define MAX_FD 65536
#define TICK 1e-3

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Per connection, when pipelining: responses still due, and how much of "\r\n\r\n" the
 * last read ended in. */
static int due[MAX_FD];
static unsigned char matched[MAX_FD];
/* At a fixed rate: when each connection's next request is due. */
static double next_due[MAX_FD];

/* Reads all `fd` has (edge-triggered) and counts the response ends in it. Returns the
 * responses ended, or -1 when the connection failed. */
static int read_ends(int fd, char *buf, size_t size) {
    static const char END[] = "\r\n\r\n";
    int ends = 0, m = matched[fd];
    for (;;) {
        ssize_t got = recv(fd, buf, size, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN))
            return -1;
        if (got < 0)
            break;
        for (ssize_t i = 0; i < got; i++) {
            /* The only overlap of the pattern with itself: a '\r' starts it again. */
            m = buf[i] == END[m] ? m + 1 : buf[i] == '\r';
            if (m == 4) {
                ends++;
                m = 0;
            }
        }
        if ((size_t)got < size)
            break;
    }
    matched[fd] = m;
    return ends;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s PORT CONNECTIONS SECONDS [DEPTH [RATE]]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), connections = atoi(argv[2]), ep = epoll_create1(0), lost = 0;
    int depth = argc > 4 ? atoi(argv[4]) : 1;
    double rate = argc > 5 ? atof(argv[5]) : 0;
    if (depth < 1 || depth > MAX_DEPTH) {
        fprintf(stderr, "DEPTH must be 1 to %d\n", MAX_DEPTH);
        return 2;
    }
    if (rate < 0 || (rate > 0 && depth != 1)) {
        fprintf(stderr, "RATE must be positive, with DEPTH 1\n");
        return 2;
    }
    double interval = rate > 0 ? connections / rate : 0;
    char requests[MAX_DEPTH * sizeof REQUEST];
    size_t len = sizeof REQUEST - 1;
    for (int i = 0; i < depth; i++)
        memcpy(requests + i * len, REQUEST, len);
    int *fds = calloc(connections, sizeof *fds);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    for (int i = 0; i < connections; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr)) {
            perror("connect");
            return 1;
        }
        if (fd >= MAX_FD) {
            fprintf(stderr, "too many connections\n");
            return 1;
        }
        fds[i] = fd;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        if (rate == 0) {
            due[fd] = depth;
            send(fd, requests, depth * len, MSG_NOSIGNAL);
        }
    }
    double start = now();
    for (int i = 0; i < connections && rate > 0; i++)
        next_due[fds[i]] = start + i * interval / connections;
    struct epoll_event events[256];
    int ready[256];
    char buf[16384];
    long responses = 0;
    double end = start + atof(argv[3]), t;
    while ((t = now()) < end) {
        struct timespec wait = {.tv_sec = 1};
        if (rate > 0) {
            /* Sends what is due within this tick, then sleeps until the next one. */
            for (int i = 0; i < connections; i++) {
                int fd = fds[i];
                if (due[fd] == 0 && next_due[fd] <= t + TICK) {
                    due[fd] = 1;
                    next_due[fd] += interval;
                    send(fd, requests, len, MSG_NOSIGNAL);
                }
            }
            double into_tick = (t - start) / TICK;
            wait.tv_sec = 0;
            wait.tv_nsec = (long)(((long)into_tick + 1 - into_tick) * TICK * 1e9);
        }
        int n = epoll_pwait2(ep, events, 256, &wait, NULL), answered = 0;
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd, ends;
            if (depth == 1) {
                ssize_t got = recv(fd, buf, 4096, 0);
                ends = got > 0 ? 1 : got == 0 || errno != EAGAIN ? -1 : 0;
            } else {
                ends = read_ends(fd, buf, sizeof buf);
            }
            if (ends < 0) {
                close(fd);
                due[fd] = -1; /* never sent on again */
                lost++;
                continue;
            }
            responses += ends;
            due[fd] -= ends;
            if (rate == 0 && due[fd] <= 0 && ends > 0) {
                due[fd] = depth;
                ready[answered++] = fd;
            }
        }
        for (int i = 0; i < answered; i++)
            send(ready[i], requests, depth * len, MSG_NOSIGNAL);
    }
    if (lost)
        fprintf(stderr, "%d connections failed\n", lost);
    printf("%ld %.3f\n", responses, t - start);
    return 0;
}
