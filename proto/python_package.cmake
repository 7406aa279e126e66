# Turns the Python output of protoc under ROOT into a package nested in
# pjrt_client: rewrites `from pjrt.v1 import x_pb2` (and the grpc.health
# equivalent) to absolute imports under pjrt_client._proto, and adds the
# __init__.py files.
file(GLOB_RECURSE modules "${ROOT}/*.py")
foreach(module ${modules})
  file(READ ${module} text)
  string(REGEX REPLACE "\nfrom (pjrt|grpc\\.health)\\.v1 import" "\nfrom pjrt_client._proto.\\1.v1 import" text "${text}")
  file(WRITE ${module} "${text}")
endforeach()
foreach(dir "" pjrt pjrt/v1 grpc grpc/health grpc/health/v1)
  file(WRITE "${ROOT}/${dir}/__init__.py" "")
endforeach()
