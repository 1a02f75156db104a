/*
 * The floor server: the least a keep-alive hello server can do on Linux, to measure
 * how much of a request's CPU is the kernel's. W worker processes, each pinned to
 * CPU w, under SCHED_BATCH, on its own SO_REUSEPORT listener, with an edge-triggered
 * epoll loop that answers every recv with one prebuilt send. No parse: each read is
 * taken for one request, which holds for a client with one request in flight per
 * connection (wrk -t1, percore bench without --pipeline), and the answer is assumed
 * to fit in the socket's buffer at once. Worker w is pinned to CPU w, unless `nopin`
 * is given (then taskset's mask applies). Not a server to use.
 *
 *     cc -O2 -o /tmp/floor-server benches/floor/server.c
 *     taskset -c 0,1 /tmp/floor-server PORT WORKERS [nopin]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char RESPONSE[] =
    "HTTP/1.1 200 OK\r\nServer: floor\r\nDate: Mon, 30 Nov 2026 12:00:00 GMT\r\n"
    "Content-Type: text/plain\r\nContent-Length: 14\r\n\r\nhello, world!\n";

static void serve(int listener) {
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = listener}, events[512];
    char buf[16384];
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
    for (;;) {
        int n = epoll_wait(ep, events, 512, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd, conn;
            if (fd == listener) {
                for (;;) {
                    conn = accept4(listener, NULL, NULL, SOCK_NONBLOCK);
                    if (conn >= 0) {
                        struct epoll_event ce = {.events = EPOLLIN | EPOLLET, .data.fd = conn};
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
            for (;;) {
                ssize_t got = recv(fd, buf, sizeof buf, 0);
                if (got > 0) {
                    send(fd, RESPONSE, sizeof RESPONSE - 1, MSG_NOSIGNAL);
                } else if (got == 0 || errno != EAGAIN) {
                    close(fd);
                    break;
                }
                if (got < (ssize_t)sizeof buf)
                    break;
            }
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PORT WORKERS [nopin]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), workers = atoi(argv[2]), pin = argc < 4 || strcmp(argv[3], "nopin") != 0;
    for (int w = 0; w < workers; w++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
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
            struct sched_param param = {0};
            cpu_set_t cpus;
            CPU_ZERO(&cpus);
            CPU_SET(w, &cpus);
            if (pin && sched_setaffinity(0, sizeof cpus, &cpus))
                perror("sched_setaffinity");
            sched_setscheduler(0, SCHED_BATCH, &param);
            serve(fd);
        }
        close(fd);
    }
    while (wait(NULL) > 0) {
    }
    return 0;
}
