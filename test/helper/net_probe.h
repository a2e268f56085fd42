/* Shared by the net probe's files (net_probe.c: the modes and main; net_probe_load.c: the load modes). */
#pragma once
#include <sys/socket.h>

/* "1.2.3.4" or "fd00::1" with `port` into `out`; exits with 2 on anything else. */
socklen_t address(const char *text, int port, struct sockaddr_storage *out);
int tcp_flood(const char *addr, int port, int n, int hold);
int until_eperm(const char *addr, int port, int ms);
