/*
 * The floor server: the least a keep-alive hello server can do on Linux, to measure
 * how much of a request's CPU is the kernel's. W worker processes, each pinned to
 * CPU w, under Linux's default policy (as percore's workers), on its own
 * SO_REUSEPORT listener, with an edge-triggered epoll loop that answers every recv
 * with one send. No parse: the only work per request is finding where it ends (each
 * "\r\n\r\n", also across reads), so that
 * pipelined requests get one answer each, all of a read's answers in one prebuilt
 * send; the answers are assumed to fit in the socket's buffer at once. Worker w is
 * pinned to CPU w, unless `nopin` is given (then taskset's mask applies). With
 * `close`, each connection is closed after its first answer (for ab without -k),
 * and, as percore does, its listener defers accept until the request is in and a
 * new connection is answered at once, before it would be added to epoll. It listens
 * on 127.0.0.1, or on ADDR with `bind=ADDR` (in a network namespace of its own). Not
 * a server to use.
 *
 *     cc -O2 -o /tmp/floor-server benches/floor/server.c
 *     taskset -c 0,1 /tmp/floor-server PORT WORKERS [nopin] [close] [bind=ADDR]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char RESPONSE[] =
    "HTTP/1.1 200 OK\r\nServer: floor\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\n"
    "Content-Type: text/plain\r\nContent-Length: 14\r\n\r\nhello, world!\n";

/* Answers one send may carry: a read of 16 KiB holds at most this many requests of
 * wrk's size. */
#define MAX_ANSWERS 512
#define MAX_FDS 65536

static char answers[MAX_ANSWERS * (sizeof RESPONSE - 1)];
/* Per connection: how much of "\r\n\r\n" the previous read ended with. */
static unsigned char matched[MAX_FDS];

/* Counts the request ends in buf, carrying a partial match across reads. */
static int count_ends(int fd, const char *buf, ssize_t len) {
    static const char END[] = "\r\n\r\n";
    int ends = 0, m = matched[fd];
    for (ssize_t i = 0; i < len; i++) {
        if (buf[i] == END[m]) {
            if (++m == 4) {
                ends++;
                m = 0;
            }
        } else {
            m = buf[i] == '\r';
        }
    }
    matched[fd] = m;
    return ends;
}

static int close_after_answer;

/* Reads what a connection sent and answers it; returns 0 once the connection is
 * closed or (with `close`) answered, 1 when it may send more. */
static int answer(int fd, char *buf, size_t size) {
    for (;;) {
        ssize_t got = recv(fd, buf, size, 0);
        if (got > 0) {
            int ends = count_ends(fd, buf, got);
            if (ends > MAX_ANSWERS)
                ends = MAX_ANSWERS;
            if (ends > 0)
                send(fd, answers, ends * (sizeof RESPONSE - 1), MSG_NOSIGNAL);
            if (ends > 0 && close_after_answer) {
                close(fd);
                return 0;
            }
        } else if (got == 0 || errno != EAGAIN) {
            close(fd);
            return 0;
        }
        if (got < (ssize_t)size)
            return 1;
    }
}

static void serve(int listener) {
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = listener}, events[512];
    char buf[16384];
    for (int i = 0; i < MAX_ANSWERS; i++)
        memcpy(answers + i * (sizeof RESPONSE - 1), RESPONSE, sizeof RESPONSE - 1);
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
    for (;;) {
        int n = epoll_wait(ep, events, 512, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd, conn;
            if (fd == listener) {
                for (;;) {
                    conn = accept4(listener, NULL, NULL, SOCK_NONBLOCK);
                    if (conn >= MAX_FDS) {
                        close(conn);
                    } else if (conn >= 0) {
                        matched[conn] = 0;
                        struct epoll_event ce = {.events = EPOLLIN | EPOLLET, .data.fd = conn};
                        if (!close_after_answer || answer(conn, buf, sizeof buf))
                            epoll_ctl(ep, EPOLL_CTL_ADD, conn, &ce);
                    } else if (errno == EAGAIN) {
                        break;
                    } else if (errno != ECONNABORTED && errno != EINTR) {
                        perror("accept4");
                        break;
                    }
                }
                continue;
            }
            answer(fd, buf, sizeof buf);
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PORT WORKERS [nopin] [close] [bind=ADDR]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), workers = atoi(argv[2]), pin = 1;
    const char *host = "127.0.0.1";
    for (int i = 3; i < argc; i++) {
        pin &= strcmp(argv[i], "nopin") != 0;
        close_after_answer |= strcmp(argv[i], "close") == 0;
        if (strncmp(argv[i], "bind=", 5) == 0)
            host = argv[i] + 5;
    }
    for (int w = 0; w < workers; w++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
        if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
            fprintf(stderr, "bind=%s: not an IPv4 address\n", host);
            return 2;
        }
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (close_after_answer) {
            int defer = 5;
            setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof defer);
        }
        if (bind(fd, (struct sockaddr *)&addr, sizeof addr) || listen(fd, 4096)) {
            perror("bind");
            return 1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            cpu_set_t cpus;
            CPU_ZERO(&cpus);
            CPU_SET(w, &cpus);
            if (pin && sched_setaffinity(0, sizeof cpus, &cpus))
                perror("sched_setaffinity");
            serve(fd);
        }
        close(fd);
    }
    while (wait(NULL) > 0) {
    }
    return 0;
}
