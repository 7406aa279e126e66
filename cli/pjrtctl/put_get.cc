// pjrtctl put and get: a .npy file to a device buffer, kept in a session
// that outlives the command, and back.
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "cli/npy.h"
#include "cli/pjrtctl/commands.h"

namespace pjrt::cli {
namespace {

struct PutGetOptions {
  std::string file;     // put: the .npy to upload; get: where to write
  std::string handle;   // get
  std::string session;  // token of a kept session (hex)
  bool keep = false;    // put: keep a new session and print its token
  double lease_seconds = 3600;
  int device = -1;
};

// The session of --session, or a new one (kept with --keep).
absl::StatusOr<std::unique_ptr<pjrt_client::Session>> PutGetSession(
    pjrt_client::Client& client, const PutGetOptions& o) {
  if (!o.session.empty()) {
    PJRT_ASSIGN_OR_RETURN(uint64_t id, ParseHex(o.session, "--session"));
    auto session = client.ResumeSession(id);
    if (!session.ok()) {
      return absl::Status(
          session.status().code(),
          absl::StrFormat("session %s: %s (kept sessions end when their "
                          "lease runs out)",
                          o.session, session.status().message()));
    }
    return session;
  }
  return client.OpenSession(
      {.client_name = "pjrtctl",
       .attach = !o.keep,
       .lease = absl::Seconds(o.keep ? o.lease_seconds : 0)});
}

int RunPut(const GlobalOptions& g, const PutGetOptions& o) {
  auto array = ReadNpy(o.file);
  if (!array.ok()) return FailUsage(g, array.status());
  if (!o.session.empty()) {
    auto token = ParseHex(o.session, "--session");
    if (!token.ok()) return FailUsage(g, token.status());
  }
  if (o.keep && !o.session.empty()) {
    return FailUsage(g, absl::InvalidArgumentError(
                            "--keep makes a new session; --session reuses "
                            "one: give one of them"));
  }
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto session = PutGetSession(**client, o);
  if (!session.ok()) return Fail(g, session.status());
  auto resolved = DeviceOrFirst(**client, o.device);
  if (!resolved.ok()) return Fail(g, resolved.status());
  const int device = *resolved;
  absl::StatusOr<pjrt_client::Buffer> buffer;
  {
    ProgressBar bar(g, "upload", static_cast<int64_t>(array->data.size()));
    buffer = (*session)->Upload(array->dtype, array->dims, array->data, device,
                                bar.callback());
  }
  if (!buffer.ok()) return Fail(g, buffer.status());
  const bool kept = o.keep || !o.session.empty();
  if (o.keep) {
    absl::Status status = (*session)->Keep();
    if (!status.ok()) return Fail(g, status);
  }
  const pjrt_client::ArrayShape shape = buffer->info().shape;
  const uint64_t handle = kept ? buffer->Release() : buffer->handle();
  if (g.json) {
    json doc = {{"file", o.file},
                {"handle", Hex(handle)},
                {"device", device},
                {"bytes", array->data.size()},
                {"kept", kept}};
    doc.update(ShapeJson(shape));
    if (kept) doc["session"] = Hex((*session)->id());
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat("uploaded %s as %s on device %d: handle %s\n",
                                 o.file, pjrt_client::ShapeToString(shape),
                                 device, Hex(handle));
    if (kept) {
      std::cout << "session " << Hex((*session)->id())
                << " (reuse it with --session; it lives until its lease runs "
                   "out)\n";
    } else {
      std::cout << "the session closes now and frees the buffer; pass --keep "
                   "to keep both\n";
    }
  }
  return kExitOk;
}

int RunGet(const GlobalOptions& g, const PutGetOptions& o) {
  auto handle = ParseHex(o.handle, "handle");
  if (!handle.ok()) return FailUsage(g, handle.status());
  auto token = ParseHex(o.session, "--session");
  if (!token.ok()) return FailUsage(g, token.status());
  auto client = Connect(g);
  if (!client.ok()) return Fail(g, client.status());
  auto session = PutGetSession(**client, o);
  if (!session.ok()) return Fail(g, session.status());
  auto buffer = (*session)->Adopt(*handle);
  if (!buffer.ok()) return Fail(g, buffer.status());
  absl::StatusOr<std::vector<uint8_t>> data;
  {
    ProgressBar bar(g, "download", buffer->size_bytes());
    data = buffer->Download(bar.callback());
  }
  // The buffer stays in the session.
  const pjrt_client::BufferInfo info = buffer->info();
  buffer->Release();
  if (!data.ok()) return Fail(g, data.status());
  HostArray array;
  array.dtype = info.shape.dtype;
  array.dims = info.shape.dims;
  array.data = *std::move(data);
  absl::Status written = WriteNpy(o.file, array);
  if (!written.ok()) return Fail(g, written, kExitUsage);
  if (g.json) {
    json doc = {{"file", o.file},
                {"handle", Hex(*handle)},
                {"device", info.device_id},
                {"bytes", array.data.size()}};
    doc.update(ShapeJson(info.shape));
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat(
        "wrote %s (%s, %s) from handle %s\n", o.file,
        pjrt_client::ShapeToString(info.shape),
        FormatByteSize(static_cast<int64_t>(array.data.size())), Hex(*handle));
  }
  return kExitOk;
}

}  // namespace

void AddPutGetCommands(CLI::App& app, const GlobalOptions& g,
                       Command* command) {
  auto put_options = std::make_shared<PutGetOptions>();
  auto* put = app.add_subcommand(
      "put",
      "Upload a .npy file to a device. With --keep the buffer stays, in a\n"
      "session that outlives this command (its token is printed); --session\n"
      "adds to such a session.\n"
      "Example: pjrtctl put x.npy --keep\n"
      "Example: pjrtctl put y.npy --session 0x1f2e3d4c5b6a7980 --device 1");
  put->add_option("FILE", put_options->file, ".npy file to upload")
      ->required()
      ->check(CLI::ExistingFile);
  put->add_option("--device", put_options->device,
                  "Global id of the device (default: the daemon's first)")
      ->check(WholeNumber(0, std::numeric_limits<int>::max()));
  put->add_flag("--keep", put_options->keep,
                "Keep the buffer in a new session and print its token");
  CLI::Option* session =
      put->add_option("--session", put_options->session,
                      "Token of a kept session to add the buffer to");
  CLI::Option* lease =
      put->add_option("--lease", put_options->lease_seconds,
                      "Seconds a kept session lives without use (default "
                      "3600; the daemon caps it); with --keep")
          ->check(PositiveNumber());
  put->callback([&g, put_options, command, session, lease] {
    // An empty --session is a mistake, not "no session"; a lease is the
    // kept session's, which only --keep makes.
    const bool empty_session =
        session->count() > 0 && put_options->session.empty();
    const bool stray_lease = lease->count() > 0 && !put_options->keep;
    *command = [&g, put_options, empty_session, stray_lease] {
      if (empty_session) {
        return FailUsage(g, absl::InvalidArgumentError(
                                "--session is empty; give the token `put "
                                "--keep` printed, such as 0x1f2e3d4c5b6a7980"));
      }
      if (stray_lease) {
        return FailUsage(g, absl::InvalidArgumentError(
                                "--lease sets the lease of the session --keep "
                                "makes; give --keep too"));
      }
      return RunPut(g, *put_options);
    };
  });

  auto get_options = std::make_shared<PutGetOptions>();
  auto* get = app.add_subcommand(
      "get",
      "Download a buffer of a kept session to a .npy file.\n"
      "Example: pjrtctl get 0x5a5a... --session 0x1f2e... -o x.npy");
  get->add_option("HANDLE", get_options->handle, "The buffer's handle (hex)")
      ->required();
  get->add_option("-o,--output", get_options->file, ".npy file to write")
      ->required();
  get->add_option("--session", get_options->session,
                  "Token of the session that holds the buffer")
      ->required();
  get->callback([&g, get_options, command] {
    *command = [&g, get_options] { return RunGet(g, *get_options); };
  });
}

}  // namespace pjrt::cli
