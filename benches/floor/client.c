/*
 * The floor client: the least a keep-alive load generator can do on Linux, to measure
 * how much of a response's CPU is the kernel's. N connections, one request in flight
 * on each; an edge-triggered epoll loop reads what each ready connection has and, once
 * every ready one is read, sends each its next request, as percore bench and wrk do.
 * No parse and no timing: each read is taken for one whole response, which holds for
 * small answers (nginx's or percore's hello). Prints the responses counted and the
 * seconds they took; a connection that fails is said on stderr and not replaced.
 *
 *     cc -O2 -o /tmp/floor-client benches/floor/client.c
 *     taskset -c 1 /tmp/floor-client PORT CONNECTIONS SECONDS
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char REQUEST[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s PORT CONNECTIONS SECONDS\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), connections = atoi(argv[2]), ep = epoll_create1(0), lost = 0;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    for (int i = 0; i < connections; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr)) {
            perror("connect");
            return 1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        send(fd, REQUEST, sizeof REQUEST - 1, MSG_NOSIGNAL);
    }
    struct epoll_event events[256];
    int ready[256];
    char buf[4096];
    long responses = 0;
    double start = now(), end = start + atof(argv[3]), t;
    while ((t = now()) < end) {
        int n = epoll_wait(ep, events, 256, 1000), answered = 0;
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            ssize_t got = recv(fd, buf, sizeof buf, 0);
            if (got > 0) {
                ready[answered++] = fd;
            } else if (got == 0 || errno != EAGAIN) {
                close(fd);
                lost++;
            }
        }
        responses += answered;
        for (int i = 0; i < answered; i++)
            send(ready[i], REQUEST, sizeof REQUEST - 1, MSG_NOSIGNAL);
    }
    if (lost)
        fprintf(stderr, "%d connections failed\n", lost);
    printf("%ld %.3f\n", responses, t - start);
    return 0;
}
