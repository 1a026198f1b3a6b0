// A userspace IPv4 switch with a fixed one-way delay: netem's `delay` for kernels without sch_netem.
//
// One TUN device (IFF_TUN | IFF_NO_PI) per "host". The caller moves each device into its host's
// network namespace and addresses it there (ip link set NAME netns NS; ip -n NS addr add ...); the
// file descriptors stay here, in the namespace that started the switch. Every IPv4 packet read from
// a device is written to the device whose host owns its destination address, DELAY after it was
// read; packets to other addresses (and anything not IPv4) are dropped. With --rate, each
// destination's link also serialises its packets at that rate (a FIFO ahead of the delay), so the
// delivery time is max(arrival, link free) + size / rate + DELAY.
//
// One thread, one ppoll loop: a FIFO per destination (with one delay and one rate per link, the
// deadlines in a FIFO never decrease), ppoll's nanosecond timeout set to the earliest deadline,
// timer slack 1 ns. SIGTERM / SIGINT end it; the devices are not persistent, so they vanish with
// the process, in whichever namespace they are. By default the devices take TCP segmentation
// offload (IFF_VNET_HDR): a sender's kernel hands over up to 64 KiB at once, the receiver's kernel
// treats it as that many MTU-sized segments, as over veth; --no-offload moves one MTU-sized
// packet per read and write (about 190 MB/s at MTU 1500 on a 2-core VM: the switch's syscalls).
//
//   delay_switch [--delay 2ms] [--rate 1gbit] [--queue-bytes N] [--no-offload] [--ready-file F]
//                NAME=IPV4...
//
// Prints, on exit, packets and bytes forwarded, the drops by cause, and how late the deliveries
// were against their deadlines (mean, max): the accuracy of the emulated delay.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using Nanos = std::int64_t;

// struct virtio_net_hdr (flags, gso_type, hdr_len, gso_size, csum_start, csum_offset): its header,
// <linux/virtio_net.h>, does not compile as C++ (a member named `class`).
constexpr int kVnetHeaderBytes = 10;

Nanos now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return Nanos{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Packet {
  Nanos due;
  std::vector<std::uint8_t> bytes;
};

/// One host: its device, its address, and the packets on their way to it.
struct Port {
  std::string name;
  std::uint32_t addr = 0;  // network order
  int fd = -1;
  std::deque<Packet> queue;
  std::size_t queued_bytes = 0;
  Nanos link_free = 0;  // when --rate's serialisation of the last queued packet ends
};

struct Stats {
  std::uint64_t forwarded = 0, bytes = 0, unknown_dst = 0, not_ipv4 = 0, queue_full = 0,
                write_failed = 0;
  Nanos late_sum = 0, late_max = 0;
};

/// Parses "2ms", "150us", "0", "1.5s", "800ns" into nanoseconds; -1 if malformed.
Nanos parse_duration(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0) return -1;
  std::string unit(end);
  double scale = 0;
  if (unit == "s") scale = 1e9;
  else if (unit == "ms") scale = 1e6;
  else if (unit == "us") scale = 1e3;
  else if (unit == "ns" || (unit.empty() && v == 0)) scale = 1;
  else return -1;
  return static_cast<Nanos>(v * scale + 0.5);
}

/// Parses "1gbit", "500mbit", "64kbit", "1000000bit" into bits per second; -1 if malformed.
double parse_rate(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) return -1;
  std::string unit(end);
  if (unit == "gbit") return v * 1e9;
  if (unit == "mbit") return v * 1e6;
  if (unit == "kbit") return v * 1e3;
  if (unit == "bit") return v;
  return -1;
}

/// Creates a non-persistent TUN device NAME without packet information; -1 and a message if not.
/// With offload, every packet carries a virtio_net_hdr and TCP may hand over segments of up to
/// 64 KiB, cut to the device's MTU by the receiving kernel (as veth does): a packet per syscall
/// less than a fortieth as often at MTU 1500.
int open_tun(const std::string& name, bool offload) {
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "delay_switch: /dev/net/tun: %s\n", std::strerror(errno));
    return -1;
  }
  ifreq ifr{};
  ifr.ifr_flags = static_cast<short>(IFF_TUN | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0));
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
    std::fprintf(stderr, "delay_switch: TUNSETIFF %s: %s\n", name.c_str(), std::strerror(errno));
    close(fd);
    return -1;
  }
  int head = kVnetHeaderBytes;
  if (offload && (ioctl(fd, TUNSETVNETHDRSZ, &head) < 0 ||
                  ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN) < 0)) {
    std::fprintf(stderr, "delay_switch: TUNSETOFFLOAD %s: %s\n", name.c_str(), std::strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

int usage() {
  std::fprintf(stderr,
               "usage: delay_switch [--delay 2ms] [--rate 1gbit] [--queue-bytes N] [--no-offload] "
               "[--ready-file F] NAME=IPV4...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Nanos delay = 0;
  double rate_bps = 0;  // 0: no serialisation
  std::size_t queue_limit = std::size_t{64} << 20;
  std::string ready_file;
  bool offload = true;
  std::vector<Port> ports;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "--delay" && has_value) {
      delay = parse_duration(argv[++i]);
      if (delay < 0) return std::fprintf(stderr, "delay_switch: bad --delay %s\n", argv[i]), 2;
    } else if (a == "--rate" && has_value) {
      rate_bps = parse_rate(argv[++i]);
      if (rate_bps < 0) return std::fprintf(stderr, "delay_switch: bad --rate %s\n", argv[i]), 2;
    } else if (a == "--queue-bytes" && has_value) {
      queue_limit = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--no-offload") {
      offload = false;
    } else if (a == "--ready-file" && has_value) {
      ready_file = argv[++i];
    } else if (auto eq = a.find('='); eq != std::string::npos && a[0] != '-') {
      Port p;
      p.name = a.substr(0, eq);
      in_addr addr{};
      if (p.name.empty() || p.name.size() >= IFNAMSIZ ||
          inet_pton(AF_INET, a.substr(eq + 1).c_str(), &addr) != 1) {
        return std::fprintf(stderr, "delay_switch: bad host %s (NAME=IPV4)\n", a.c_str()), 2;
      }
      p.addr = addr.s_addr;
      ports.push_back(std::move(p));
    } else {
      return usage();
    }
  }
  if (ports.size() < 2) return usage();

  std::unordered_map<std::uint32_t, std::size_t> by_addr;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    if (!by_addr.emplace(ports[i].addr, i).second) {
      return std::fprintf(stderr, "delay_switch: address of %s given twice\n",
                          ports[i].name.c_str()), 2;
    }
    ports[i].fd = open_tun(ports[i].name, offload);
    if (ports[i].fd < 0) return 1;  // the devices opened so far close with the process
  }

  // Signals are blocked except inside ppoll, so a SIGTERM can never fall between the check of
  // g_stop and the wait.
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigset_t blocked, during_poll;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGINT);
  sigprocmask(SIG_BLOCK, &blocked, &during_poll);
  sigdelset(&during_poll, SIGTERM);
  sigdelset(&during_poll, SIGINT);
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // ppoll wakes within microseconds of a deadline

  if (!ready_file.empty()) {
    // Written once every device exists: the caller may now move them.
    std::string tmp = ready_file + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%d\n", static_cast<int>(getpid()));
      std::fclose(f);
      std::rename(tmp.c_str(), ready_file.c_str());
    }
  }

  Stats st;
  std::vector<pollfd> pfds(ports.size());
  for (std::size_t i = 0; i < ports.size(); ++i) pfds[i] = {ports[i].fd, POLLIN, 0};
  // A GSO packet is at most 64 KiB plus its header; more room costs nothing.
  std::vector<std::uint8_t> buf(std::size_t{256} << 10);
  // The virtio_net_hdr ahead of each packet with offload; forwarded as it came, since its
  // checksum offsets count from the IP header, as they do on the device it is written to.
  const std::size_t head = offload ? kVnetHeaderBytes : 0;
  const double ns_per_byte = rate_bps > 0 ? 8e9 / rate_bps : 0;

  while (!g_stop) {
    // Deliver what is due.
    Nanos t = now_ns();
    Nanos next_due = -1;
    for (auto& p : ports) {
      while (!p.queue.empty() && p.queue.front().due <= t) {
        Packet& pk = p.queue.front();
        ssize_t n = write(p.fd, pk.bytes.data(), pk.bytes.size());
        if (n == static_cast<ssize_t>(pk.bytes.size())) {
          ++st.forwarded;
          st.bytes += pk.bytes.size();
          Nanos late = now_ns() - pk.due;
          st.late_sum += late;
          if (late > st.late_max) st.late_max = late;
        } else {
          ++st.write_failed;  // device down or gone: a lost packet, as on a wire
        }
        p.queued_bytes -= pk.bytes.size();
        p.queue.pop_front();
      }
      if (!p.queue.empty() && (next_due < 0 || p.queue.front().due < next_due)) {
        next_due = p.queue.front().due;
      }
    }

    timespec timeout{};
    timespec* tp = nullptr;
    if (next_due >= 0) {
      Nanos wait = next_due - now_ns();
      if (wait < 0) wait = 0;
      timeout.tv_sec = wait / 1'000'000'000;
      timeout.tv_nsec = wait % 1'000'000'000;
      tp = &timeout;
    }
    int r = ppoll(pfds.data(), pfds.size(), tp, &during_poll);
    if (r < 0) {
      if (errno == EINTR) continue;
      std::perror("delay_switch: ppoll");
      break;
    }
    if (r == 0) continue;

    // Read what arrived, a bounded batch per device so that none starves the others.
    for (std::size_t i = 0; i < ports.size(); ++i) {
      if (!(pfds[i].revents & POLLIN)) continue;
      for (int batch = 0; batch < 64; ++batch) {
        ssize_t n = read(ports[i].fd, buf.data(), buf.size());
        if (n <= 0) break;  // EAGAIN: drained
        Nanos arrived = now_ns();
        if (static_cast<std::size_t>(n) < head + 20 || (buf[head] >> 4) != 4) {
          ++st.not_ipv4;  // IPv6 router solicitations and the like
          continue;
        }
        std::uint32_t dst;
        std::memcpy(&dst, buf.data() + head + 16, 4);
        auto it = by_addr.find(dst);
        if (it == by_addr.end()) {
          ++st.unknown_dst;
          continue;
        }
        Port& to = ports[it->second];
        if (to.queued_bytes + static_cast<std::size_t>(n) > queue_limit) {
          ++st.queue_full;
          continue;
        }
        Nanos leave = arrived;
        if (ns_per_byte > 0) {
          Nanos start = to.link_free > arrived ? to.link_free : arrived;
          leave = start + static_cast<Nanos>(ns_per_byte * static_cast<double>(n));
          to.link_free = leave;
        }
        to.queue.push_back({leave + delay, std::vector<std::uint8_t>(buf.begin(), buf.begin() + n)});
        to.queued_bytes += static_cast<std::size_t>(n);
      }
    }
  }

  for (auto& p : ports) close(p.fd);
  std::fprintf(stderr,
               "delay_switch: %llu packets (%llu bytes) forwarded, lateness mean %.1f us max "
               "%.1f us; dropped: %llu unknown destination, %llu not IPv4, %llu queue full, "
               "%llu write failed\n",
               static_cast<unsigned long long>(st.forwarded),
               static_cast<unsigned long long>(st.bytes),
               st.forwarded ? static_cast<double>(st.late_sum) / st.forwarded / 1e3 : 0.0,
               static_cast<double>(st.late_max) / 1e3,
               static_cast<unsigned long long>(st.unknown_dst),
               static_cast<unsigned long long>(st.not_ipv4),
               static_cast<unsigned long long>(st.queue_full),
               static_cast<unsigned long long>(st.write_failed));
  return 0;
}
