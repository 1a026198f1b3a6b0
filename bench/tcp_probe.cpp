// TCP round trip and bulk throughput between two hosts: checks an emulated link (delay_switch).
//
//   tcp_probe serve ADDR PORT [--port-file F]   serve connections, one at a time, until killed
//   tcp_probe rtt ADDR PORT [N]                  connect time and N one-byte echo round trips (ms)
//   tcp_probe bulk ADDR PORT MIB                 send MIB MiB; MB/s until the server has them all
//
// The client's first byte picks the server's job: 'e' echoes every byte back, 's' swallows
// everything up to end of stream and answers one byte. Output is one line of key=value pairs.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dml/net/internal/bulk_wire.hpp"

namespace {

using dml::net::internal::RecvAll;  // whole buffers, EINTR retried (the bulk channel's)
using dml::net::internal::SendAll;

double now_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

bool make_addr(const char* host, const char* port, sockaddr_in* out) {
  *out = {};
  out->sin_family = AF_INET;
  out->sin_port = htons(static_cast<unsigned short>(std::atoi(port)));
  return inet_pton(AF_INET, host, &out->sin_addr) == 1;
}

int serve(const sockaddr_in& addr, const char* port_file) {
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) < 0 || listen(ls, 16) < 0) {
    std::perror("tcp_probe: bind/listen");
    return 1;
  }
  if (port_file) {
    if (FILE* f = std::fopen(port_file, "w")) {
      std::fprintf(f, "%d\n", ntohs(addr.sin_port));
      std::fclose(f);
    }
  }
  std::vector<char> buf(1 << 20);
  for (;;) {
    int c = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR) continue;
      std::perror("tcp_probe: accept");
      return 1;
    }
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char job = 0;
    if (RecvAll(c, &job, 1)) {
      if (job == 'e') {
        for (;;) {
          ssize_t r = read(c, buf.data(), buf.size());
          if (r <= 0 || !SendAll(c, buf.data(), static_cast<size_t>(r))) break;
        }
      } else if (job == 's') {
        while (read(c, buf.data(), buf.size()) > 0) {
        }
        SendAll(c, "k", 1);
      }
    }
    close(c);
  }
}

int connect_to(const sockaddr_in& addr, double* connect_ms) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  double t0 = now_ms();
  if (connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) < 0) {
    std::perror("tcp_probe: connect");
    close(s);
    return -1;
  }
  *connect_ms = now_ms() - t0;
  return s;
}

int rtt(const sockaddr_in& addr, int rounds) {
  double connect_ms = 0;
  int s = connect_to(addr, &connect_ms);
  if (s < 0) return 1;
  if (!SendAll(s, "e", 1)) return 1;
  std::vector<double> t;
  for (int i = 0; i < rounds; ++i) {
    char b = static_cast<char>('0' + i % 10), back = 0;
    double t0 = now_ms();
    if (!SendAll(s, &b, 1) || !RecvAll(s, &back, 1) || back != b) {
      std::fprintf(stderr, "tcp_probe: echo %d failed\n", i);
      return 1;
    }
    t.push_back(now_ms() - t0);
  }
  close(s);
  std::sort(t.begin(), t.end());
  std::printf("connect_ms=%.3f rtt_min_ms=%.3f rtt_median_ms=%.3f rtt_max_ms=%.3f\n", connect_ms,
              t.front(), t[t.size() / 2], t.back());
  return 0;
}

int bulk(const sockaddr_in& addr, long mib) {
  double connect_ms = 0;
  int s = connect_to(addr, &connect_ms);
  if (s < 0) return 1;
  std::vector<char> buf(1 << 20, 'x');
  double t0 = now_ms();
  if (!SendAll(s, "s", 1)) return 1;
  for (long i = 0; i < mib; ++i) {
    if (!SendAll(s, buf.data(), buf.size())) {
      std::perror("tcp_probe: write");
      return 1;
    }
  }
  shutdown(s, SHUT_WR);
  char k = 0;
  if (!RecvAll(s, &k, 1)) {
    std::fprintf(stderr, "tcp_probe: no acknowledgement\n");
    return 1;
  }
  double ms = now_ms() - t0;
  close(s);
  std::printf("bytes=%ld seconds=%.3f MB_per_s=%.1f\n", mib << 20, ms / 1e3,
              static_cast<double>(mib << 20) / 1e6 / (ms / 1e3));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: tcp_probe serve ADDR PORT [--port-file F] | rtt ADDR PORT [N] | "
                 "bulk ADDR PORT MIB\n");
    return 2;
  }
  std::string mode = argv[1];
  sockaddr_in addr;
  if (!make_addr(argv[2], argv[3], &addr)) {
    std::fprintf(stderr, "tcp_probe: bad address %s\n", argv[2]);
    return 2;
  }
  if (mode == "serve") {
    const char* pf = (argc >= 6 && std::string(argv[4]) == "--port-file") ? argv[5] : nullptr;
    return serve(addr, pf);
  }
  if (mode == "rtt") return rtt(addr, argc >= 5 ? std::atoi(argv[4]) : 10);
  if (mode == "bulk") return bulk(addr, argc >= 5 ? std::atol(argv[4]) : 256);
  std::fprintf(stderr, "tcp_probe: unknown mode %s\n", mode.c_str());
  return 2;
}
