// service: an HTTP inference service over one compiled Kiln artifact.
//
//   service MODEL.kiln [--host 127.0.0.1] [--port 8080] [--contexts 1] [--threads-per-context 1]
//                      [--http-threads N] [--wait-ms 5000] [--max-body-bytes 16777216]
//
//   POST /v1/infer   inputs as JSON (json_body.h) or as .npy parts of a multipart/form-data body
//                    (npy_body.h); the outputs come back in the request's format
//   GET  /healthz    200 "ok" (the model is loaded before the port opens)
//   GET  /metrics    Prometheus text format (metrics.h)
//
// Concurrency: --contexts K ExecutionContexts over one Model (context_pool.h), each running its
// calls on --threads-per-context T CPU threads (0: one per CPU). A request holds one of
// --http-threads HTTP threads (default max(8, 2K)) and borrows a context for its Run; when none
// is free within --wait-ms it gets 503 with Retry-After: 1. SIGINT or SIGTERM closes the listening socket, lets
// the requests already accepted finish (an idle keep-alive connection is dropped within 2 s) and
// exits 0. The contexts use the CPU backend: outputs are read from host memory.
//
// Errors, as {"error": "message"}: 400 for a body that cannot be read as the model's inputs (bad
// JSON with the parser's position, unknown or missing input, wrong dtype, data length not
// matching the shape), 404 unknown path, 405 wrong method, 413 body over --max-body-bytes, 415
// neither JSON nor multipart, 422 when Run refuses the inputs (the prologue's message, verbatim,
// e.g. a shape no entry accepts), 406 when an output's dtype has no encoding in the request's
// format, 500 for other runtime errors, 503 no context free in time.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "context_pool.h"
#include "inputs.h"
#include "json_body.h"
#include "metrics.h"
#include "npy_body.h"

namespace {

int g_stop_pipe[2] = {-1, -1};

void OnStopSignal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_stop_pipe[1], &b, 1);  // async-signal-safe
}

struct Options {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (the chosen one is printed)
  int contexts = 1;
  int threads_per_context = 1;
  int http_threads = 0;  // 0: max(8, 2 * contexts)
  int wait_ms = 5000;
  int64_t max_body_bytes = 16 << 20;
};

constexpr const char* kUsage =
    "usage: service MODEL.kiln [--host 127.0.0.1] [--port 8080] [--contexts 1] [--threads-per-context 1]\n"
    "                          [--http-threads N] [--wait-ms 5000] [--max-body-bytes 16777216]\n";

template <typename T>
bool ParseNumber(const char* s, T min, T* out) {
  const char* end = s + std::strlen(s);
  auto [p, ec] = std::from_chars(s, end, *out);
  return ec == std::errc() && p == end && *out >= min;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      if (!o->model_path.empty()) return false;
      o->model_path = a;
      continue;
    }
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    bool ok = true;
    if (a == "--host") o->host = v;
    else if (a == "--port") ok = ParseNumber(v, 0, &o->port) && o->port <= 65535;
    else if (a == "--contexts") ok = ParseNumber(v, 1, &o->contexts);
    else if (a == "--threads-per-context") ok = ParseNumber(v, 0, &o->threads_per_context);
    else if (a == "--http-threads") ok = ParseNumber(v, 1, &o->http_threads);
    else if (a == "--wait-ms") ok = ParseNumber(v, 0, &o->wait_ms);
    else if (a == "--max-body-bytes") ok = ParseNumber<int64_t>(v, 1, &o->max_body_bytes);
    else ok = false;
    if (!ok) {
      std::fprintf(stderr, "service: bad option %s %s\n", a.c_str(), v);
      return false;
    }
  }
  return !o->model_path.empty();
}

void SetError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", message}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

// The media type of a Content-Type header, lower-case, without parameters.
std::string MediaType(const httplib::Request& req) {
  std::string t = req.get_header_value("Content-Type");
  t = t.substr(0, t.find(';'));
  t.erase(std::remove(t.begin(), t.end(), ' '), t.end());
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return t;
}

// HTTP status for a Run error: the caller's inputs (the prologue's refusal, an index out of
// range, shapes too large for the context limit) are 422; the rest is the service's problem.
int RunErrorStatus(kiln::StatusCode code) {
  switch (code) {
    case kiln::StatusCode::kInvalidArgument:
    case kiln::StatusCode::kOutOfRange:
    case kiln::StatusCode::kResourceExhausted: return 422;
    default: return 500;
  }
}

// An output dtype the request's format does not carry (float16 in JSON, bfloat16 in .npy) is
// 406; the request may ask again in the other format.
int EncodeErrorStatus(const kiln::Status& st) { return st.code() == kiln::StatusCode::kUnimplemented ? 406 : 500; }

// httplib 0.11 listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's
// library): more new connections than that arriving while the accept thread is busy have their
// SYNs dropped and wait for the client's retransmit, 1 s. Listening again on the bound socket
// sets a larger backlog (Linux updates it in place).
class Server : public httplib::Server {
 public:
  bool RaiseBacklog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
};

// The service's paths and the methods each takes (HEAD is served as GET).
struct Route {
  const char* path;
  const char* allow;
};
constexpr Route kRoutes[] = {{"/v1/infer", "POST"}, {"/healthz", "GET, HEAD"}, {"/metrics", "GET, HEAD"}};

// A request body, read through httplib's ContentReader. Past max_bytes the rest is read and
// dropped, so the connection stays usable: httplib 0.11 holds a Content-Length body to
// set_payload_max_length (413 before any handler runs) but reads a chunked one whole.
struct Body {
  bool read_ok = true;
  bool too_large = false;
  std::string raw;                                          // not multipart
  std::vector<std::pair<std::string, std::string>> parts;  // multipart/form-data: name, content
};

Body ReadBody(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read,
              int64_t max_bytes) {
  Body body;
  // A request with neither header has no body (RFC 9112 6.3); httplib 0.11 would read to EOF.
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) return body;
  int64_t total = 0;
  auto keep = [&](const char* data, size_t n, std::string& into) {
    total += static_cast<int64_t>(n);
    body.too_large = body.too_large || total > max_bytes;
    if (!body.too_large) into.append(data, n);
    return true;
  };
  if (req.is_multipart_form_data()) {
    body.read_ok = read(
        [&](const httplib::MultipartFormData& part) {
          if (!body.too_large) body.parts.emplace_back(part.name, "");
          return true;
        },
        [&](const char* data, size_t n) { return body.parts.empty() || keep(data, n, body.parts.back().second); });
  } else {
    body.read_ok = read([&](const char* data, size_t n) { return keep(data, n, body.raw); });
  }
  if (!body.read_ok && res.status == 413) body.too_large = true;  // httplib's Content-Length check
  return body;
}

std::string TooLargeMessage(const httplib::Request& req, int64_t max_bytes) {
  const std::string length = req.get_header_value("Content-Length");
  return "request body" + (length.empty() ? "" : " of " + length + " bytes") + " is over the limit of " +
         std::to_string(max_bytes) + " bytes (--max-body-bytes)";
}

class Service {
 public:
  Service(const Options& options, kiln::Model model, std::unique_ptr<ContextPool> pool)
      : options_(options), model_(std::move(model)), pool_(std::move(pool)), metrics_(model_, pool_->size()) {}

  void Infer(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
    const Body body = ReadBody(req, res, read, options_.max_body_bytes);
    if (body.too_large) return SetError(res, 413, TooLargeMessage(req, options_.max_body_bytes));
    if (!body.read_ok) return SetError(res, 400, "malformed or incomplete request body");
    RequestInputs inputs(model_.inputs());
    const bool multipart = req.is_multipart_form_data();
    kiln::Status parsed;
    if (multipart) {
      for (const auto& [name, content] : body.parts) {
        parsed = ParseNpyInput(name, content, inputs);
        if (!parsed.ok()) break;
      }
    } else if (MediaType(req) == "application/json") {
      parsed = ParseJsonInputs(body.raw, inputs);
    } else {
      return SetError(res, 415, "Content-Type '" + req.get_header_value("Content-Type") +
                                    "': send application/json or multipart/form-data with one .npy part per input");
    }
    if (!parsed.ok()) return SetError(res, 400, parsed.message());
    kiln::Result<std::vector<kiln::TensorView>> views = inputs.Views();
    if (!views.ok()) return SetError(res, 400, views.status().message());

    std::optional<ContextPool::Lease> lease = pool_->Borrow(std::chrono::milliseconds(options_.wait_ms));
    if (!lease) {
      res.set_header("Retry-After", "1");
      return SetError(res, 503, "all " + std::to_string(pool_->size()) + " contexts stayed busy for " +
                                    std::to_string(options_.wait_ms) + " ms (--wait-ms)");
    }
    std::vector<kiln::TensorView> outputs;
    const kiln::Status run = lease->context().Run(*views, outputs);
    metrics_.RecordRun(lease->index(), lease->context(), run.ok());
    if (!run.ok()) return SetError(res, RunErrorStatus(run.code()), run.ToString());
    // The outputs live in the context's memory: encode them before the lease ends.
    if (multipart) {
      kiln::Result<MultipartBody> body = NpyMultipartOutputs(model_.outputs(), outputs);
      if (!body.ok()) return SetError(res, EncodeErrorStatus(body.status()), body.status().ToString());
      res.set_content(std::move(body->body), body->content_type.c_str());
    } else {
      kiln::Result<std::string> body = JsonOutputs(model_.outputs(), outputs);
      if (!body.ok()) return SetError(res, EncodeErrorStatus(body.status()), body.status().ToString());
      res.set_content(std::move(*body), "application/json");
    }
  }

  void Scrape(const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.Render(pool_->busy()), "text/plain; version=0.0.4; charset=utf-8");
  }

  // Fills the body of an error response httplib made itself (404, 413, a malformed request).
  httplib::Server::HandlerResponse LibraryError(const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours, already has one
    if (res.status == 404) {  // no handler matched: a method none is registered for
      NoRoute(req, res, nullptr);
    } else if (res.status == 413) {
      SetError(res, 413, TooLargeMessage(req, options_.max_body_bytes));
    } else {
      SetError(res, res.status, "malformed HTTP request (status " + std::to_string(res.status) + ")");
    }
    return httplib::Server::HandlerResponse::Handled;
  }

  // Requests no route takes: 405 for a path that exists, else 404. A body is read first (and
  // dropped), within the limit.
  void NoRoute(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader* read) {
    if (read && ReadBody(req, res, *read, options_.max_body_bytes).too_large) {
      return SetError(res, 413, TooLargeMessage(req, options_.max_body_bytes));
    }
    for (const Route& route : kRoutes) {
      if (req.path != route.path) continue;
      res.set_header("Allow", route.allow);
      return SetError(res, 405, "method " + req.method + " is not allowed on " + req.path + "; allowed: " + route.allow);
    }
    SetError(res, 404, "no route for " + req.method + " " + req.path +
                           "; the service answers POST /v1/infer, GET /healthz and GET /metrics");
  }

  Metrics& metrics() { return metrics_; }

 private:
  const Options& options_;
  kiln::Model model_;
  std::unique_ptr<ContextPool> pool_;
  Metrics metrics_;
};

void AddRoutes(httplib::Server& server, Service& service) {
  using httplib::ContentReader, httplib::Request, httplib::Response;
  using WithBody = httplib::Server::HandlerWithContentReader;
  server.Post("/v1/infer", WithBody([&](const Request& q, Response& r, const ContentReader& read) { service.Infer(q, r, read); }));
  server.Get("/healthz", [](const Request&, Response& r) { r.set_content("ok", "text/plain"); });
  server.Get("/metrics", [&](const Request& q, Response& r) { service.Scrape(q, r); });
  // Everything else (httplib tries routes in the order given). Methods that may carry a body get
  // a reader, so that it is drained within the limit, not read whole by httplib.
  auto no_route = [&](const Request& q, Response& r) { service.NoRoute(q, r, nullptr); };
  auto no_route_body = WithBody([&](const Request& q, Response& r, const ContentReader& read) { service.NoRoute(q, r, &read); });
  server.Get(".*", no_route).Options(".*", no_route);
  server.Post(".*", no_route_body).Put(".*", no_route_body).Patch(".*", no_route_body).Delete(".*", no_route_body);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, &options)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  // SIGINT/SIGTERM write their number to a pipe that a thread of ours waits on (a handler, not
  // sigwait: threads that libraries start before main, such as OpenBLAS's, do not block the
  // signals, and one of them may be the one to receive it). A client closing its socket
  // mid-response must not kill the process.
  if (pipe(g_stop_pipe) != 0) {
    std::perror("service: pipe");
    return 1;
  }
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);

  kiln::Result<kiln::Model> model = kiln::Model::Load(options.model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "service: %s: %s\n", options.model_path.c_str(), model.status().ToString().c_str());
    return 1;
  }
  kiln::ContextOptions context_options;
  context_options.device = kiln::Device::kCpu;
  context_options.cpu.threads = options.threads_per_context;
  kiln::Result<std::unique_ptr<ContextPool>> pool = ContextPool::Create(*model, options.contexts, context_options);
  if (!pool.ok()) {
    std::fprintf(stderr, "service: %s\n", pool.status().ToString().c_str());
    return 1;
  }
  Service service(options, std::move(*model), std::move(*pool));

  Server server;
  const int http_threads = options.http_threads ? options.http_threads : std::max(8, 2 * options.contexts);
  server.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
  server.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  server.set_keep_alive_timeout(2);
  AddRoutes(server, service);
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [&](const httplib::Request& q, httplib::Response& r) { return service.LibraryError(q, r); }));
  // httplib calls this for every response just before writing it, so a client that has its
  // answer finds it counted in /metrics.
  server.set_post_routing_handler([&](const httplib::Request&, httplib::Response& r) { service.metrics().RecordResponse(r.status); });

  const int port = options.port == 0 ? server.bind_to_any_port(options.host)
                                     : (server.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port < 0 || !server.RaiseBacklog()) {
    std::fprintf(stderr, "service: cannot listen on %s:%d\n", options.host.c_str(), options.port);
    return 1;
  }
  std::printf("service: listening on http://%s:%d (%d contexts x %d threads, %d HTTP threads)\n", options.host.c_str(),
              port, options.contexts, options.threads_per_context, http_threads);
  std::fflush(stdout);

  std::atomic<bool> listen_done{false};
  unsigned char signal_number = 0;
  std::thread stopper([&] {
    while (read(g_stop_pipe[0], &signal_number, 1) < 0 && errno == EINTR) {
    }
    if (signal_number == 0) return;  // main's wake-up after listen failed
    // stop() acts only once listen_after_bind has started running.
    while (!listen_done && !server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server.stop();
  });
  const bool listened = server.listen_after_bind();  // returns once stopped and the accepted requests are done
  listen_done = true;
  const unsigned char wake = 0;
  if (write(g_stop_pipe[1], &wake, 1) != 1) std::perror("service: write");  // no-op if the stopper has read a signal
  stopper.join();
  if (!listened || !signal_number) {
    std::fprintf(stderr, "service: the listening socket failed\n");
    return 1;
  }
  std::printf("service: %s, stopped after finishing the requests in flight\n", strsignal(signal_number));
  return 0;
}
