// `/run_code`: interpreted code with no files runs in the language's FnCall pool (code in argv, stdin the
// program's own); compiled languages, files / fetch_files and code too long for one argument get a
// sandbox of their own (compiling writes files, and a written FnCall container is discarded anyway).
#include "fusion.hpp"
#include "fusion_parts.hpp"

#include <cstring>
#include <memory>
#include <vector>

#include "sandlet/sandlet_fncall.h"

namespace sandlet::cli::fusion {

namespace {

namespace bj = boost::json;

constexpr size_t kMaxArgvCode = 96 * 1024;  // one argv string holds at most 128 KiB (MAX_ARG_STRLEN)
constexpr double kMaxMemoryMb = 1 << 20;

struct Language {
  const char* name;
  const char* source;
  std::vector<std::string> compile;  // empty: interpreted
  std::vector<std::string> run;
  std::vector<std::string> inline_argv;  // "{code}" replaced by the code; empty: never inline
};

const std::vector<Language>& languages() {
  static const std::vector<Language> kLanguages = {
      {"python", "main.py", {}, {"python3", "main.py"}, {"python3", "-c", "{code}"}},
      {"bash", "main.sh", {}, {"bash", "main.sh"}, {"bash", "-c", "{code}"}},
      {"cpp", "main.cpp", {"g++", "-std=c++17", "-O2", "-o", "main", "main.cpp"}, {"./main"}, {}},
  };
  return kLanguages;
}

const Language* find_language(const std::string& name) {
  for (const auto& l : languages())
    if (name == l.name) return &l;
  return nullptr;
}

// ---- base64 (files travel base64-encoded in both directions) ----

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string b64_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kB64[(v >> s) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) v |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool b64_decode(std::string_view in, std::string* out) {
  if (in.size() % 4 != 0) return false;
  out->clear();
  uint32_t v = 0;
  int bits = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '=') {
      if (i < in.size() - 2) return false;  // padding only at the end
      continue;
    }
    const char* p = std::strchr(kB64, c);
    if (c == '\0' || p == nullptr) return false;
    v = v << 6 | uint32_t(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(char((v >> bits) & 0xff));
    }
  }
  return true;
}

}  // namespace

// ---- shared with /run_jupyter (fusion_parts.hpp) ----

std::vector<std::pair<std::string, std::string>> parse_files(const bj::object& o) {
  std::vector<std::pair<std::string, std::string>> files;
  if (const bj::value* f = o.if_contains("files"); f != nullptr && !f->is_null()) {
    if (!f->is_object()) throw RequestError("field 'files': expected an object of path -> base64");
    for (const auto& [path, content] : f->as_object()) {
      std::string data;
      if (!content.is_null() && (!content.is_string() || !b64_decode(content.as_string(), &data)))
        throw RequestError("files['" + std::string(path) + "']: not base64");
      if (path.empty() || path.find('\0') != std::string::npos) throw RequestError("files: bad path");
      files.emplace_back(std::string(path), std::move(data));
    }
  }
  return files;
}

double seconds_field(const bj::object& o, const char* name, double dflt, bool zero_ok) {
  const bj::value* v = o.if_contains(name);
  if (v == nullptr || v->is_null()) return dflt;
  if (!v->is_number()) throw RequestError(std::string("field '") + name + "': expected a number of seconds");
  const double s = v->to_number<double>();
  if (!((zero_ok ? s >= 0 : s > 0) && s <= 3600))
    throw RequestError(std::string("field '") + name + "': must be in " + (zero_ok ? "[0" : "(0") + ", 3600] seconds");
  return s;
}

std::vector<std::string> parse_fetch_files(const bj::object& o) {
  std::vector<std::string> fetch;
  if (const bj::value* f = o.if_contains("fetch_files"); f != nullptr && !f->is_null()) {
    if (!f->is_array()) throw RequestError("field 'fetch_files': expected an array of paths");
    for (const auto& p : f->as_array()) {
      if (!p.is_string() || p.as_string().empty() || std::string_view(p.as_string()).find('\0') != std::string_view::npos)
        throw RequestError("fetch_files: bad path");
      fetch.emplace_back(p.as_string());
    }
  }
  return fetch;
}

namespace {

// ---- the request ----

struct Request {
  std::string code, language, stdin_data;
  double compile_timeout = 10, run_timeout = 10;
  int64_t memory_mb = -1;
  std::vector<std::pair<std::string, std::string>> files;  // path -> bytes
  std::vector<std::string> fetch_files;
};

Request parse(const bj::value& doc) {
  const bj::object* o = doc.if_object();
  if (o == nullptr) throw RequestError("the body must be a JSON object");
  Request r;
  const bj::value* code = o->if_contains("code");
  if (code == nullptr || !code->is_string()) throw RequestError("field 'code': required, a string");
  const bj::value* lang = o->if_contains("language");
  if (lang == nullptr || !lang->is_string()) throw RequestError("field 'language': required, a string");
  r.code = std::string(code->as_string());
  r.language = std::string(lang->as_string());
  if (const bj::value* in = o->if_contains("stdin"); in != nullptr && !in->is_null()) {
    if (!in->is_string()) throw RequestError("field 'stdin': expected a string");
    r.stdin_data = std::string(in->as_string());
  }
  r.compile_timeout = seconds_field(*o, "compile_timeout", 10, false);
  r.run_timeout = seconds_field(*o, "run_timeout", 10, false);
  if (const bj::value* m = o->if_contains("memory_limit_MB"); m != nullptr && !m->is_null()) {
    if (!m->is_number()) throw RequestError("field 'memory_limit_MB': expected a number");
    const double mb = m->to_number<double>();
    if (mb > kMaxMemoryMb) throw RequestError("field 'memory_limit_MB': at most 1048576 (1 TiB)");
    r.memory_mb = static_cast<int64_t>(mb);
  }
  r.files = parse_files(*o);
  r.fetch_files = parse_fetch_files(*o);
  return r;
}

// ---- answers ----

// Bytes from inside a sandbox become JSON text: invalid UTF-8 is replaced (U+FFFD), as Python's
// errors="replace" does, so a hostile program cannot break the answer.
std::string utf8_text(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    const auto c = uint8_t(in[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n != 0 && i + n <= in.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (uint8_t(in[i + k]) >> 6) == 2;
    if (ok && n == 2) ok = c >= 0xc2;
    if (ok && n == 3) {
      const auto c1 = uint8_t(in[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
    }
    if (ok && n == 4) {
      const auto c1 = uint8_t(in[i + 1]);
      ok = c <= 0xf4 && !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(in.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

// SandboxFusion's CommandRunResult; a command killed by signal N reports -N (as Python's subprocess does).
bj::object command_result(const ExecResult& r) {
  bj::object o;
  o["status"] = r.timed_out ? "TimeLimitExceeded" : "Finished";
  o["execution_time"] = double(r.run_ns) / 1e9;
  o["return_code"] = r.signal != 0 ? -r.signal : r.exit_code;
  o["stdout"] = utf8_text(r.stdout_data);
  o["stderr"] = utf8_text(r.stderr_data);
  return o;
}

bool succeeded(const bj::value& result) {
  const bj::object* o = result.if_object();
  return o != nullptr && o->at("status") == "Finished" && o->at("return_code") == 0;
}

bj::value answer(bj::value compiled, bj::value ran, bj::object files) {
  const bool ok = (compiled.is_null() || succeeded(compiled)) && succeeded(ran);
  bj::object o;
  o["status"] = ok ? "Success" : "Failed";
  o["message"] = "";
  o["compile_result"] = std::move(compiled);
  o["run_result"] = std::move(ran);
  o["files"] = std::move(files);
  o["executor_pod_name"] = nullptr;
  return o;
}

std::string join(const std::string& dir, const std::string& path) { return path[0] == '/' ? path : dir + "/" + path; }

bj::value in_own_sandbox(Runtime& rt, const Spec& spec, const Language& lang, const Request& req) {
  RequestSandbox box(rt, spec, req.files);
  Sandbox& sb = box.sandbox();
  sb.write_file(join(kWorkdir, lang.source), req.code);
  bj::value compiled = nullptr;
  if (!lang.compile.empty()) {
    ExecOptions c(lang.compile);
    c.cwd = kWorkdir;
    c.timeout_s = req.compile_timeout;
    c.output_limit = kOutputLimit;
    compiled = command_result(sb.exec(c));
    if (!succeeded(compiled)) return answer(std::move(compiled), nullptr, {});
  }
  ExecOptions r(lang.run);
  r.cwd = kWorkdir;
  r.stdin_data = req.stdin_data;
  r.timeout_s = req.run_timeout;
  r.output_limit = kOutputLimit;
  bj::value ran = command_result(sb.exec(r));
  return answer(std::move(compiled), std::move(ran), box.fetch(req.fetch_files));
}

ExecResult call_inline(Runtime& rt, const std::string& spec_json, const Language& lang, const Request& req) {
  std::vector<std::string> argv;
  for (const auto& a : lang.inline_argv) argv.push_back(a == "{code}" ? req.code : a);
  std::vector<const char*> cargv;
  for (const auto& a : argv) cargv.push_back(a.c_str());
  cargv.push_back(nullptr);
  sandlet_call_options_t o = SANDLET_CALL_OPTIONS_INIT;
  o.spec_json = spec_json.c_str();
  o.argv = cargv.data();
  o.stdin_data = req.stdin_data.data();
  o.stdin_len = req.stdin_data.size();
  o.timeout_s = req.run_timeout;
  o.output_limit = kOutputLimit;
  sandlet_exec_result_t* out = nullptr;
  detail::check(sandlet_call(rt.get(), &o, &out));
  return ExecResult::take(out);
}

}  // namespace

RequestSandbox::RequestSandbox(Runtime& rt, const Spec& spec,
                               const std::vector<std::pair<std::string, std::string>>& files)
    : sb_(rt.create(spec)) {
  try {
    if (ExecResult m = sb_.exec(ExecOptions({"mkdir", "-p", kWorkdir})); m.exit_code != 0)
      throw Error(SANDLET_FAILED_PRECONDITION, "mkdir " + std::string(kWorkdir) + ": " + m.stderr_data);
    for (const auto& [path, data] : files) sb_.write_file(join(kWorkdir, path), data);
  } catch (...) {
    destroy_quietly();  // a constructor that throws runs no destructor of its own
    throw;
  }
}

RequestSandbox::~RequestSandbox() { destroy_quietly(); }

void RequestSandbox::destroy_quietly() noexcept {
  try {
    sb_.destroy();
  } catch (...) {
  }  // an owned sandbox still goes with this process
}

bj::object RequestSandbox::fetch(const std::vector<std::string>& paths) {
  bj::object fetched;
  for (const auto& path : paths) {
    try {
      fetched[path] = b64_encode(sb_.read_file(join(kWorkdir, path)));
    } catch (const Error&) {
      // left out: the code did not make it
    }
  }
  return fetched;
}

bj::object command_run_result(const ExecResult& r) { return command_result(r); }

bool known_language(const std::string& name) { return find_language(name) != nullptr; }

bj::value run_code(const Service& svc, const bj::value& doc) {
  const Request req = parse(doc);
  const Language* lang = find_language(req.language);
  auto spec_it = svc.specs.find(req.language);
  if (lang == nullptr || spec_it == svc.specs.end()) {
    std::string served;
    for (const auto& [name, _] : svc.specs) served += (served.empty() ? "" : ", ") + name;
    throw RequestError("field 'language': '" + req.language + "' is not served here (served: " + served + ")");
  }
  bj::value spec_doc = json::parse(spec_it->second);
  if (req.memory_mb > 0) json::object_at(spec_doc.as_object(), "limits")["memory"] = req.memory_mb << 20;
  const std::string spec_json = json::serialize(spec_doc);
  try {
    const bool inline_ok = svc.pooled && !lang->inline_argv.empty() && req.files.empty() && req.fetch_files.empty() &&
                           req.code.size() <= kMaxArgvCode && req.code.find('\0') == std::string::npos;
    if (inline_ok) return answer(nullptr, command_result(call_inline(*svc.rt, spec_json, *lang, req)), {});
    return in_own_sandbox(*svc.rt, Spec::from_json(spec_json), *lang, req);
  } catch (const Error& e) {
    bj::object o;
    o["status"] = "SandboxError";
    o["message"] = e.what();
    o["compile_result"] = nullptr;
    o["run_result"] = nullptr;
    o["files"] = bj::object();
    return o;
  }
}

}  // namespace sandlet::cli::fusion
