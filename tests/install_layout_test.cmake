# Installs the build into PREFIX and checks the layout that packaging and the
# systemd unit rely on.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
# A portable build installs its kernel modules.
set(PORTABLE_PATHS "")
if(KERNEL_MODULES)
  set(PORTABLE_PATHS lib/pjrtd/libpjrt_host_x86-64-v3.so
                     lib/pjrtd/libpjrt_host_x86-64-v4.so)
endif()
foreach(path
    bin/pjrtd
    bin/pjrtctl
    bin/pjrt-hlo
    etc/pjrtd/pjrtd.toml
    lib/systemd/system/pjrtd.service
    lib/sysusers.d/pjrtd.conf
    lib/pjrtd/python/pjrt_client/__init__.py
    lib/pjrtd/python/pjrt_client/_proto/pjrt/v1/buffer_pb2.py
    share/doc/pjrtd/README.md
    share/bash-completion/completions/pjrtctl
    lib/libpjrt_client.so
    ${PORTABLE_PATHS}
    include/pjrt/pjrt_client/client.h
    include/pjrt/pjrt_client/types.h
    lib/cmake/pjrt_client/pjrt_clientConfig.cmake
    lib/python3/dist-packages/pjrt_client.pth)
  if(NOT EXISTS ${PREFIX}/${path})
    message(FATAL_ERROR "missing from the installation: ${path}")
  endif()
endforeach()
# The client's headers speak in its own types: no generated code installed.
file(GLOB_RECURSE generated ${PREFIX}/include/*.pb.h)
if(generated)
  message(FATAL_ERROR "generated headers installed: ${generated}")
endif()
file(READ ${PREFIX}/lib/systemd/system/pjrtd.service unit)
foreach(needle "Type=notify" "User=pjrtd" "RuntimeDirectory=pjrtd" "CacheDirectory=pjrtd"
               "ExecStart=${PREFIX}/bin/pjrtd --config ${PREFIX}/etc/pjrtd/pjrtd.toml")
  string(FIND "${unit}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "pjrtd.service lacks '${needle}':\n${unit}")
  endif()
endforeach()
file(READ ${PREFIX}/lib/python3/dist-packages/pjrt_client.pth pth)
if(NOT pth STREQUAL "${PREFIX}/lib/pjrtd/python\n")
  message(FATAL_ERROR "pjrt_client.pth names '${pth}'")
endif()
file(REMOVE_RECURSE ${PREFIX})
