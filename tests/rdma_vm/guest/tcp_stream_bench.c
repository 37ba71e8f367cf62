/*
 * Plain blocking TCP stream benchmark used by smoke.sh to check rsocket's
 * preload library (librspreload.so turns these AF_INET stream sockets into
 * rsockets over RDMA). Nothing RDMA-specific is in here on purpose.
 *
 *   tcp_stream_bench server PORT
 *   tcp_stream_bench client HOST PORT MEGABYTES
 *
 * The server accepts one connection, reads until EOF, answers one byte and
 * exits. The client connects (retrying for up to 20 s while the server
 * starts), sends MEGABYTES MiB in 64 KiB writes, half-closes, waits for the
 * answer byte and prints "MB/s <value>" (10^6 bytes per second).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CHUNK = 64 * 1024 };

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run_server(int port) {
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) { perror("socket"); return 1; }
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) < 0) { perror("bind"); return 1; }
    if (listen(listener, 1) < 0) { perror("listen"); return 1; }
    int conn = accept(listener, NULL, NULL);
    if (conn < 0) { perror("accept"); return 1; }
    static char buf[CHUNK];
    long long total = 0;
    for (;;) {
        ssize_t n = read(conn, buf, sizeof buf);
        if (n < 0) { perror("read"); return 1; }
        if (n == 0) break;
        total += n;
    }
    char ack = 'k';
    if (write(conn, &ack, 1) != 1) { perror("write ack"); return 1; }
    printf("received %lld bytes\n", total);
    close(conn);
    close(listener);
    return 0;
}

static int connect_with_retry(const char *host, int port) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) { fprintf(stderr, "bad address %s\n", host); return -1; }
    double deadline = now_seconds() + 20.0;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) { perror("socket"); return -1; }
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) return fd;
        close(fd);
        if (now_seconds() > deadline) { perror("connect"); return -1; }
        usleep(200 * 1000);
    }
}

static int run_client(const char *host, int port, long megabytes) {
    int fd = connect_with_retry(host, port);
    if (fd < 0) return 1;
    static char buf[CHUNK];
    memset(buf, 'v', sizeof buf);
    long long total = megabytes * 1024LL * 1024LL, sent = 0;
    double start = now_seconds();
    while (sent < total) {
        ssize_t n = write(fd, buf, sizeof buf);
        if (n < 0) { perror("write"); return 1; }
        sent += n;
    }
    shutdown(fd, SHUT_WR);
    char ack;
    if (read(fd, &ack, 1) != 1) { perror("read ack"); return 1; }
    double seconds = now_seconds() - start;
    printf("sent %lld bytes in %.3f s\nMB/s %.2f\n", sent, seconds, (double)sent / seconds / 1e6);
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "server") == 0) return run_server(atoi(argv[2]));
    if (argc == 5 && strcmp(argv[1], "client") == 0) return run_client(argv[2], atoi(argv[3]), atol(argv[4]));
    fprintf(stderr, "usage: %s server PORT | client HOST PORT MEGABYTES\n", argv[0]);
    return 2;
}
