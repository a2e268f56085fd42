#include "network/dns/dns_message.hpp"

#include <algorithm>
#include <cstring>

namespace sandlet::net {
namespace {

constexpr size_t kMaxPointerHops = 64;
constexpr size_t kClassicUdp = 512;

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> m) : m_(m) {}
  size_t size() const { return m_.size(); }
  uint8_t at(size_t i) const { return m_[i]; }
  uint16_t u16(size_t i) const { return static_cast<uint16_t>(m_[i] << 8 | m_[i + 1]); }
  uint32_t u32(size_t i) const { return static_cast<uint32_t>(u16(i)) << 16 | u16(i + 2); }

  // Reads the name at `pos`; `next` is where the record goes on. Pointers must point strictly before the
  // label sequence that holds them, so no chain can loop; hops and length are bounded as well.
  bool name(size_t pos, std::string& text, std::vector<uint8_t>* wire, size_t& next, std::string& err) const {
    text.clear();
    if (wire) wire->clear();
    size_t p = pos, limit = pos, octets = 0, hops = 0;
    bool jumped = false;
    for (;;) {
      if (p >= m_.size()) return err = "a name runs past the end of the message", false;
      const uint8_t len = m_[p];
      if ((len & 0xC0) == 0xC0) {
        if (p + 1 >= m_.size()) return err = "a compression pointer runs past the end of the message", false;
        const size_t off = static_cast<size_t>(len & 0x3F) << 8 | m_[p + 1];
        if (off < kDnsHeaderSize) return err = "a compression pointer points into the header", false;
        if (off >= limit) return err = "a compression pointer does not point backwards", false;
        if (++hops > kMaxPointerHops) return err = "too many compression pointers in one name", false;
        if (!jumped) next = p + 2;
        jumped = true;
        p = limit = off;
        continue;
      }
      if (len & 0xC0) return err = "a label of a reserved type", false;
      octets += 1 + len;
      if (octets > kDnsMaxName) return err = "a name longer than 255 octets", false;
      if (len == 0) {
        if (wire) wire->push_back(0);
        if (!jumped) next = p + 1;
        return true;
      }
      if (p + 1 + len > m_.size()) return err = "a label runs past the end of the message", false;
      if (!text.empty()) text += '.';
      if (wire) wire->push_back(len);
      for (size_t i = p + 1; i < p + 1 + len; ++i) {
        uint8_t c = m_[i];
        if (wire) wire->push_back(c);
        if (c >= 'A' && c <= 'Z') c = static_cast<uint8_t>(c - 'A' + 'a');
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
          text += static_cast<char>(c);
        } else {
          char esc[5];
          esc[0] = '\\';
          esc[1] = static_cast<char>('0' + c / 100);
          esc[2] = static_cast<char>('0' + c / 10 % 10);
          esc[3] = static_cast<char>('0' + c % 10);
          esc[4] = 0;
          text += esc;
        }
      }
      p += 1 + len;
    }
  }

 private:
  std::span<const uint8_t> m_;
};

// One resource record at `pos`; A, AAAA and CNAME of class IN are kept in `out` (when given).
bool record(const Reader& r, size_t& pos, DnsMessage& msg, bool keep, std::string& err) {
  DnsRecord rec;
  size_t p = 0;
  if (!r.name(pos, rec.owner, nullptr, p, err)) return false;
  if (p + 10 > r.size()) return err = "a record header runs past the end of the message", false;
  rec.type = r.u16(p);
  rec.klass = r.u16(p + 2);
  rec.ttl = r.u32(p + 4);
  if (rec.ttl & 0x80000000u) rec.ttl = 0;
  const size_t rdlen = r.u16(p + 8);
  const size_t rd = p + 10;
  if (rd + rdlen > r.size()) return err = "a record's data runs past the end of the message", false;
  pos = rd + rdlen;
  if (rec.type == kDnsOpt) {
    if (!rec.owner.empty()) return err = "an OPT record not owned by the root", false;
    if (msg.edns_udp_size != 0) return err = "more than one OPT record", false;
    msg.edns_udp_size = std::max<uint16_t>(rec.klass, kClassicUdp);
    return true;
  }
  if (rec.klass != kDnsClassIn) return true;
  if (rec.type == kDnsA || rec.type == kDnsAaaa) {
    const size_t want = rec.type == kDnsA ? 4 : 16;
    if (rdlen != want) return err = "an address record with " + std::to_string(rdlen) + " bytes of data", false;
    for (size_t i = 0; i < want; ++i) rec.addr[i] = r.at(rd + i);
  } else if (rec.type == kDnsCname) {
    size_t end = 0;
    if (!r.name(rd, rec.target, nullptr, end, err)) return false;
    if (end != rd + rdlen) return err = "a CNAME whose name does not fill its data", false;
  } else {
    return true;
  }
  if (keep) {
    if (msg.answers.size() >= kDnsMaxAnswersKept) return err = "more than 128 answer records", false;
    msg.answers.push_back(std::move(rec));
  }
  return true;
}

void put16(std::vector<uint8_t>& o, uint16_t v) {
  o.push_back(static_cast<uint8_t>(v >> 8));
  o.push_back(static_cast<uint8_t>(v));
}

void put32(std::vector<uint8_t>& o, uint32_t v) {
  put16(o, static_cast<uint16_t>(v >> 16));
  put16(o, static_cast<uint16_t>(v));
}

// Names already written (text -> offset), for compression of exact repeats.
struct NameTable {
  std::vector<std::pair<std::string, uint16_t>> seen;
  void put(std::vector<uint8_t>& o, const std::string& name) {
    for (const auto& [n, off] : seen) {
      if (n == name) return put16(o, static_cast<uint16_t>(0xC000 | off));
    }
    if (o.size() < 0x3FFF) seen.emplace_back(name, static_cast<uint16_t>(o.size()));
    size_t start = 0;
    while (start < name.size()) {
      size_t dot = name.find('.', start);
      if (dot == std::string::npos) dot = name.size();
      o.push_back(static_cast<uint8_t>(dot - start));
      o.insert(o.end(), name.begin() + static_cast<std::ptrdiff_t>(start), name.begin() + static_cast<std::ptrdiff_t>(dot));
      start = dot + 1;
    }
    o.push_back(0);
  }
};

}  // namespace

bool dns_is_host_name(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  size_t label = 0;
  for (char c : name) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok || ++label > 63) return false;
  }
  return label > 0;
}

DnsParse parse_dns(std::span<const uint8_t> bytes, DnsTransport transport) {
  DnsParse out;
  if (transport == DnsTransport::kTcp) {
    if (bytes.size() < 2) return out.error = "a TCP message shorter than its length prefix", out;
    const size_t len = static_cast<size_t>(bytes[0]) << 8 | bytes[1];
    if (len != bytes.size() - 2) return out.error = "a TCP length prefix that does not match the message", out;
    bytes = bytes.subspan(2);
  } else if (bytes.size() > kDnsMaxUdp) {
    return out.error = "a UDP message larger than 4096 bytes", out;
  }
  const Reader r(bytes);
  if (bytes.size() < kDnsHeaderSize) return out.error = "a message shorter than the 12-byte header", out;
  DnsHeader& h = out.message.header;
  h = {r.u16(0), r.u16(2), r.u16(4), r.u16(6), r.u16(8), r.u16(10)};
  out.header_ok = true;
  if (h.qdcount > 1) return out.error = "more than one question", out;
  const size_t records = size_t{h.ancount} + h.nscount + h.arcount;
  if (records > kDnsMaxRecords) return out.error = "more than 1024 records", out;
  size_t pos = kDnsHeaderSize;
  if (h.qdcount == 1) {
    DnsQuestion q;
    size_t p = 0;
    if (!r.name(pos, q.name, &q.wire, p, out.error)) return out;
    if (p + 4 > r.size()) return out.error = "the question runs past the end of the message", out;
    q.type = r.u16(p);
    q.klass = r.u16(p + 2);
    pos = p + 4;
    out.message.questions.push_back(std::move(q));
  }
  for (size_t i = 0; i < records; ++i) {
    if (!record(r, pos, out.message, i < h.ancount, out.error)) return out;
  }
  if (pos != r.size()) out.error = "bytes after the last record";
  return out;
}

std::vector<uint8_t> dns_canonical_wire(std::span<const uint8_t> wire) {
  std::vector<uint8_t> out(wire.begin(), wire.end());
  // Label by label, so a length octet is never taken for a letter (lengths are < 64 anyway).
  for (size_t p = 0; p < out.size() && out[p] != 0 && out[p] < 64; p += 1 + out[p]) {
    for (size_t i = p + 1; i <= p + out[p] && i < out.size(); ++i) {
      if (out[i] >= 'A' && out[i] <= 'Z') out[i] = static_cast<uint8_t>(out[i] - 'A' + 'a');
    }
  }
  return out;
}

std::vector<uint8_t> build_dns_query(uint16_t id, const DnsQuestion& q, uint16_t edns_udp_size) {
  std::vector<uint8_t> o;
  put16(o, id);
  put16(o, 0x0100);  // a standard query, recursion desired: no flag of the sandbox's (CD, AD, ...)
  put16(o, 1);
  put16(o, 0);
  put16(o, 0);
  put16(o, edns_udp_size ? 1 : 0);
  const std::vector<uint8_t> name = dns_canonical_wire(q.wire);
  o.insert(o.end(), name.begin(), name.end());
  put16(o, q.type);
  put16(o, q.klass);
  if (edns_udp_size) {
    o.push_back(0);  // the root owns OPT
    put16(o, kDnsOpt);
    put16(o, edns_udp_size);
    put32(o, 0);  // extended rcode, version 0, no DO bit
    put16(o, 0);
  }
  return o;
}

std::vector<uint8_t> build_dns_reply(const DnsMessage& query, uint8_t rcode, const std::vector<DnsRecord>& answers,
                                     DnsTransport transport) {
  const size_t limit = transport == DnsTransport::kTcp ? kDnsMaxTcp
                       : query.edns_udp_size ? std::min<size_t>(query.edns_udp_size, kDnsMaxUdp)
                                             : kClassicUdp;
  const DnsHeader& qh = query.header;
  uint16_t flags = static_cast<uint16_t>(0x8000 | (qh.flags & 0x7900) | 0x0080 | (rcode & 0xf));  // QR, opcode+RD, RA
  std::vector<uint8_t> o;
  put16(o, qh.id);
  put16(o, flags);
  const bool has_q = !query.questions.empty();
  put16(o, has_q ? 1 : 0);
  put16(o, 0);  // answer count, patched below
  put16(o, 0);
  put16(o, 0);
  NameTable names;
  if (has_q) {
    const DnsQuestion& q = query.questions.front();
    names.seen.emplace_back(q.name, static_cast<uint16_t>(o.size()));
    o.insert(o.end(), q.wire.begin(), q.wire.end());
    put16(o, q.type);
    put16(o, q.klass);
  }
  uint16_t count = 0;
  for (const DnsRecord& a : answers) {
    if (!dns_is_host_name(a.owner) || (a.type == kDnsCname && !dns_is_host_name(a.target))) continue;
    if (a.type != kDnsA && a.type != kDnsAaaa && a.type != kDnsCname) continue;
    NameTable trial = names;
    const size_t base = o.size();
    // Built in place at the message's end (compression offsets are absolute); undone if it does not fit.
    trial.put(o, a.owner);
    put16(o, a.type);
    put16(o, kDnsClassIn);
    put32(o, a.ttl);
    if (a.type == kDnsCname) {
      const size_t len_at = o.size();
      put16(o, 0);
      trial.put(o, a.target);
      const size_t rdlen = o.size() - len_at - 2;
      o[len_at] = static_cast<uint8_t>(rdlen >> 8);
      o[len_at + 1] = static_cast<uint8_t>(rdlen);
    } else {
      const size_t n = a.type == kDnsA ? 4 : 16;
      put16(o, static_cast<uint16_t>(n));
      o.insert(o.end(), a.addr.begin(), a.addr.begin() + static_cast<std::ptrdiff_t>(n));
    }
    if (o.size() > limit) {
      o.resize(base);
      o[2] |= 0x02;  // TC
      break;
    }
    names = std::move(trial);
    ++count;
  }
  o[6] = static_cast<uint8_t>(count >> 8);
  o[7] = static_cast<uint8_t>(count);
  if (transport == DnsTransport::kTcp) {
    const size_t n = o.size();
    o.insert(o.begin(), {static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)});
  }
  return o;
}

}  // namespace sandlet::net
