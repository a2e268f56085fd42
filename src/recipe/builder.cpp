// Running a recipe (builder.hpp): check everything, then step by step sandbox -> snapshot -> layer, with
// the cache in front; on failure, undo what the build added.
#include "recipe/builder.hpp"

#include <poll.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "recipe/build_cache.hpp"
#include "recipe/build_network.hpp"
#include "recipe/context.hpp"
#include "recipe/secret_stage.hpp"
#include "recipe/secrets.hpp"
#include "recipe/steps.hpp"
#include "common/error.hpp"
#include "runtime/runtime.hpp"
#include "sys/fs_util.hpp"

namespace sandlet::build {
namespace {

std::string read_recipe(const std::string& path) {
  if (path.empty()) throw Error(Code::kInvalidArgument, "build recipe: no path given");
  try {
    return sys::read_file(path, 1u << 20);
  } catch (const Error& e) {
    throw Error(Code::kInvalidArgument, "build recipe " + path + ": " + e.what(), e.err_no());
  }
}

// A sandbox that is destroyed when the step is over, however it ends.
class StepSandbox final {
 public:
  explicit StepSandbox(std::shared_ptr<Sandbox> sb) : sb_(std::move(sb)) {}
  ~StepSandbox() {
    try {
      sb_->destroy();
    } catch (...) {
      // destroy() only fails on a runtime that closed, which ends the sandbox itself.
    }
  }
  Sandbox& operator*() { return *sb_; }
  Sandbox* operator->() { return sb_.get(); }

 private:
  std::shared_ptr<Sandbox> sb_;
};

class Builder {
 public:
  Builder(Runtime& rt, const BuildOptions& o)
      : rt_(rt), o_(o), store_(rt.layer_store()), cache_(store_.dir() + "/build-cache") {}

  BuildResult run() {
    rt_.check_not_on_loop("build");
    check_build_network(o_.network);
    Recipe recipe = parse_recipe(read_recipe(o_.recipe), o_.recipe);
    const std::string context = open_context(o_.context);
    const std::string from = from_reference(recipe, o_.build_args);
    State base;
    std::vector<std::string> layers = resolve_from(recipe, from, base);
    Plan plan = plan_recipe(recipe, o_.build_args, base);
    if (!o_.tag.empty()) image::check_layer_name(o_.tag, "tag");
    // Every COPY's files before the first sandbox: a missing one fails the build with nothing made.
    std::vector<std::optional<CopyInputs>> inputs(plan.steps.size());
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const Step& st = plan.steps[i];
      if (st.kind == Kind::kCopy || st.kind == Kind::kAdd) inputs[i] = collect_copy(context, st, recipe.name);
    }

    secrets_ = load_secrets(o_.secrets);
    for (const auto& st : plan.steps)
      for (const auto& m : st.secrets)
        if (m.required && !secrets_.count(m.id))
          refuse(recipe.name, st.line, "RUN needs secret " + m.id + " (required=true), which the build was not given (--secret id=" + m.id + ",src=FILE)");
    result_.recipe = recipe.name;
    result_.notes = recipe.notes;
    result_.unused_build_args = plan.unused_build_args;
    result_.labels = plan.labels;
    try {
      for (size_t i = 0; i < plan.steps.size(); ++i) step(recipe, plan, i, inputs[i], layers);
      result_.layers = layers;
      result_.state = plan.steps.empty() ? base : plan.steps.back().state;
      if (!o_.tag.empty()) {
        auto v = store_.env_create(o_.tag, layers, result_.state.env, result_.state.workdir, result_.state.user);
        result_.environment = o_.tag + "@" + std::to_string(v.version);
      }
    } catch (...) {
      discard_made();
      throw;
    }
    return std::move(result_);
  }

 private:
  bool cancelled() const {
    if (o_.stop && o_.stop->load()) return true;
    if (o_.cancel_fd < 0) return false;
    pollfd p{o_.cancel_fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
  }

  // A layer's full stack: a snapshot layer brings the layers it goes on.
  std::vector<std::string> with_stack(const std::vector<std::string>& layers) {
    if (layers.empty()) return layers;
    auto low = store_.find(layers[0]);
    if (!low || low->stack.empty()) return layers;
    std::vector<std::string> out = low->stack;
    out.insert(out.end(), layers.begin(), layers.end());
    return out;
  }

  // FROM: an environment (name or name@N; imported images are environments), else a store layer.
  std::vector<std::string> resolve_from(const Recipe& recipe, const std::string& ref, State& base) {
    size_t line = 1;
    for (const auto& in : recipe.instructions)
      if (in.kind == Kind::kFrom) line = in.line;
    if (ref[0] == '/')
      refuse(recipe.name, line, "FROM " + ref + ": a host directory; import it first ('sandlet layer import')");
    // A local environment, then a store layer, then a registry image (pulled as the runtime's policy says;
    // FROM reads a bare name as Docker does: "ubuntu" is the default registry's library/ubuntu:latest).
    const bool forced = registry::has_docker_scheme(ref);
    if (!forced && !store_.env_exists(ref)) {
      try {
        return with_stack({store_.resolve(ref)});
      } catch (const Error& e) {
        if (e.code() != Code::kNotFound && e.code() != Code::kInvalidArgument) throw;
      }
    }
    std::string local;
    try {
      local = rt_.resolve_environment(ref, /*bare_names_are_images=*/true);
    } catch (const Error& e) {
      // A registry that cannot be reached stays UNAVAILABLE (retry later); anything else is the recipe's.
      if (e.code() == Code::kUnavailable || e.code() == Code::kDataLoss)
        throw Error(e.code(), recipe.name + ":" + std::to_string(line) + ": FROM " + ref + ": " + e.what());
      if (e.code() == Code::kNotFound && !forced)
        refuse(recipe.name, line, "FROM " + ref + ": no environment or store layer of that name or digest; " + e.what());
      refuse(recipe.name, line, "FROM " + ref + ": " + e.what());
    }
    try {
      image::EnvVersion env = store_.env_resolve(local);
      base.env = env.env;
      base.workdir = env.workdir;
      base.user = env.user;
      return with_stack(env.layers);
    } catch (const Error&) {
    }
    refuse(recipe.name, line, "FROM " + ref + ": no environment or store layer of that name or digest");
  }

  void step(const Recipe& recipe, const Plan& plan, size_t i, const std::optional<CopyInputs>& inputs,
            std::vector<std::string>& layers) {
    const Step& st = plan.steps[i];
    StepRun run{o_, recipe.name, i + 1, plan.steps.size(), [this] { return cancelled(); }, ""};
    if (cancelled()) throw Error(Code::kCancelled, run.where(st) + ": build cancelled");
    StepReport report{st.line, st.text, false, ""};
    const bool makes_layer = st.kind == Kind::kRun || st.kind == Kind::kCopy || st.kind == Kind::kAdd || st.kind == Kind::kWorkdir;
    if (!makes_layer) {
      announce(run, st, false);
      result_.steps.push_back(report);
      return;
    }
    std::vector<std::string> given;
    for (const auto& m : st.secrets)
      if (secrets_.count(m.id)) given.push_back(m.id);
    // Only a RUN gets a network; COPY and WORKDIR run the builder's own helpers.
    const NetworkPolicy net = st.kind == Kind::kRun && !st.no_network ? o_.network : NetworkPolicy{};
    run.network = network_note(o_.network, st.no_network);
    const std::string key = cache_key(layers, st, inputs ? inputs->digest : "", given, network_key(net));
    if (!o_.no_cache) {
      if (auto hit = cached(key, layers)) {
        announce(run, st, true);
        layers.push_back(*hit);
        report.cached = true;
        report.layer = *hit;
        ++result_.cached_steps;
        result_.steps.push_back(report);
        return;
      }
    }
    announce(run, st, false);
    Spec spec;
    spec.layers = layers;
    spec.hostname = "build";
    spec.labels["sandlet.build.step"] = std::to_string(i + 1);
    spec.network = net;
    if (st.kind == Kind::kRun) {
      spec.env = st.state.env;
      spec.workdir = st.state.workdir;
      spec.user = st.state.user;
    }
    // Staged before the sandbox and closed after its snapshot: only this step's sandbox ever mounts them.
    std::optional<SecretStage> stage;
    if (!st.secrets.empty()) {
      stage.emplace(st.secrets, secrets_, run.where(st));
      stage->add_mounts(spec);
    }
    SnapshotResult snap;
    {
      StepSandbox sb(create_step_sandbox(spec, run, st, stage.has_value() && !stage->empty()));
      ++result_.sandboxes;
      if (st.kind == Kind::kRun) run_step(*sb, st, run);
      else if (st.kind == Kind::kWorkdir) workdir_step(*sb, st, run);
      else copy_step(*sb, st, *inputs, run);
      if (cancelled()) throw Error(Code::kCancelled, run.where(st) + ": build cancelled");
      try {
        SnapshotOptions so;
        so.default_excludes = o_.default_excludes;
        // The secrets' mount points (directories the init made to mount them on) stay out of the layer.
        if (stage) so.exclude = stage->excludes();
        // The resolver the init wrote for this step's policy is the build's, not the result's (as Docker
        // keeps a RUN's /etc/resolv.conf out of the image).
        if (!net.none && !net.dns.empty()) so.exclude.push_back("/etc/resolv.conf");
        snap = sb->snapshot(so);
      } catch (const Error& e) {
        throw Error(e.code(), run.where(st) + ": snapshot: " + e.what(), e.err_no());
      }
    }
    const std::string& digest = snap.layer.digest;
    if (!snap.existed) made_.push_back(digest);
    made_keys_.push_back(key);
    cache_.put(key, digest, st.text);
    layers = snap.layer.stack;
    layers.push_back(digest);
    report.layer = digest;
    result_.steps.push_back(report);
  }

  std::shared_ptr<Sandbox> create_step_sandbox(const Spec& spec, const StepRun& run, const Step& st, bool secrets) {
    if (!secrets) return rt_.create(spec);
    try {
      return rt_.create(spec);
    } catch (const Error& e) {
      // Cloning a detached mount (the staged tmpfs) needs a kernel that allows it.
      if (e.err_no() == EINVAL && std::string(e.what()).find("open_tree") != std::string::npos)
        throw Error(Code::kUnimplemented, run.where(st) + ": secret mounts need a kernel that can copy a detached mount (open_tree of an fsmount: " + e.what() + ")", e.err_no());
      throw;
    }
  }

  // The cached layer for `key`, if the store still has it and it goes on exactly `layers`.
  std::optional<std::string> cached(const std::string& key, const std::vector<std::string>& layers) {
    auto digest = cache_.get(key);
    if (!digest) return std::nullopt;
    auto info = store_.find(*digest);
    if (!info || info->stack != layers) {
      cache_.remove(key);
      return std::nullopt;
    }
    return digest;
  }

  void announce(const StepRun& run, const Step& st, bool cached) {
    if (!o_.progress) return;
    BuildEvent ev;
    ev.step = run.index;
    ev.steps = run.count;
    ev.line = st.line;
    ev.text = st.text;
    ev.cached = cached;
    o_.progress(ev);
  }

  // Removes the layers this build made that nothing else references (newest first: each one's stack holds
  // the ones below), and the cache entries it wrote.
  void discard_made() noexcept {
    for (const auto& k : made_keys_) cache_.remove(k);
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
      try {
        bool referenced = false;
        for (const auto& l : store_.list()) {
          if (l.digest == *it) continue;
          if (l.parent == *it || std::find(l.stack.begin(), l.stack.end(), *it) != l.stack.end()) referenced = true;
        }
        if (referenced) continue;
        store_.remove(*it, rt_.layers_in_use());
        cache_.forget_layer(*it);
      } catch (...) {
        // Referenced meanwhile (an environment, a live sandbox): it stays, as it should.
      }
    }
    try {
      rt_.layer_mounts().release_unused(nullptr, [this] { return rt_.layers_in_use(); });
    } catch (...) {
    }
  }

  Runtime& rt_;
  const BuildOptions& o_;
  image::LayerStore& store_;
  BuildCache cache_;
  BuildResult result_;
  std::map<std::string, std::string> secrets_;  // id -> value; only ever written into a SecretStage
  std::vector<std::string> made_;       // layers this build added to the store
  std::vector<std::string> made_keys_;  // cache entries it wrote
};

}  // namespace

BuildResult build(Runtime& rt, const BuildOptions& options) { return Builder(rt, options).run(); }

}  // namespace sandlet::build
