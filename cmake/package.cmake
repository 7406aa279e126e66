# `make package`: a Debian package of everything `cmake --install` lays out
# (CPack's DEB generator), installed under /usr: pjrtd, pjrtctl, pjrt-hlo,
# the systemd unit and sysusers entry, the config, bash completion, the C++
# client (shared library, headers, CMake package) and the Python package.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pjrtd)
set(CPACK_PACKAGE_VENDOR "pjrtd")
set(CPACK_PACKAGE_CONTACT "pjrtd maintainers <pjrtd@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "device daemon for machine-learning accelerators")
set(CPACK_PACKAGE_DESCRIPTION
    "pjrtd owns a host's GPUs (or its CPU as virtual devices) and serves them
to clients over gRPC: upload arrays, compile XLA HLO and StableHLO programs,
run them on one or many devices, read results back. The package holds the
daemon and its systemd unit, pjrtctl, pjrt-hlo, and the C++ and Python
clients.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Installed with DESTDIR under the prefix /usr, so that the config lands in
# /etc (see deploy/CMakeLists.txt).
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
# gzip: several times faster to build than xz, for a package of binaries.
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
# What the binaries link, as Debian 12 names it (dpkg-shlibdeps cannot be
# used: the CUDA Toolkit's libraries belong to no Debian package).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "libc6, libstdc++6, libgcc-s1, libgomp1, libabsl20220623, libc-ares2, libdnnl2, libfmt9, libgloo0, libgrpc++1.51, libgrpc29, libmicrohttpd12, libprotobuf32, libre2-9, libspdlog1.10, libssl3, libsystemd0, libtomlplusplus3, zlib1g, python3, python3-grpcio, python3-protobuf, python3-numpy")
if(PJRT_HAVE_CUDA)
  set(CPACK_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}
Built with the CUDA platform: it loads NVRTC, cuBLASLt, cuFFT, cuDNN 9 and
NCCL from the CUDA ${CUDAToolkit_VERSION} runtime, which NVIDIA's packages
install.")
endif()
# The config is the administrator's once installed; postinst creates the
# service's user.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/debian/conffiles
    ${PROJECT_SOURCE_DIR}/cmake/debian/postinst)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
