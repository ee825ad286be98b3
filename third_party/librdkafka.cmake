# librdkafka for reclass_core, as the interface target reclass_rdkafka.
#
# By default the vendored release (third_party/librdkafka/, see its README.md) is checked
# against its sha256, extracted into the build tree and patched at configure time, then built
# by ExternalProject as a static C library with only what the worker uses. Debian 12's
# librdkafka 2.0.2 cannot finish the ApiVersions handshake with brokers that send tagged
# fields; -DRECLASS_SYSTEM_RDKAFKA=ON still links the system library (pkg-config rdkafka), and
# the Kafka commands then check its version at runtime (consumers/kafka_version.c).
option(RECLASS_SYSTEM_RDKAFKA "Link the system librdkafka (pkg-config) instead of the vendored one" OFF)

add_library(reclass_rdkafka INTERFACE)

if(RECLASS_SYSTEM_RDKAFKA)
  pkg_check_modules(RDKAFKA REQUIRED IMPORTED_TARGET rdkafka)
  target_link_libraries(reclass_rdkafka INTERFACE PkgConfig::RDKAFKA)
  message(STATUS "reclass: librdkafka ${RDKAFKA_VERSION} from the system (pkg-config)")
  return()
endif()

set(RDK_VERSION 2.15.0)
set(RDK_SHA256 3d8bae7411d6d8f5f9fb2969fff872eec4b63b759253ed4f473e5afbd153c7f1)
set(RDK_VENDOR ${CMAKE_SOURCE_DIR}/third_party/librdkafka)
set(RDK_TARBALL ${RDK_VENDOR}/librdkafka-${RDK_VERSION}.tar.gz)
set(RDK_ROOT ${CMAKE_BINARY_DIR}/third_party/librdkafka)
set(RDK_SRC ${RDK_ROOT}/src)
set(RDK_LIB ${RDK_ROOT}/build/src/librdkafka.a)
file(GLOB RDK_PATCHES CONFIGURE_DEPENDS ${RDK_VENDOR}/patches/*.patch)
list(SORT RDK_PATCHES)

# What the static archive needs at link time; found here so a missing -dev package fails the
# configure step with CMake's message instead of the librdkafka build much later.
find_package(OpenSSL REQUIRED)
find_package(ZLIB REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
find_program(RDK_PATCH_EXE patch REQUIRED)

file(SHA256 ${RDK_TARBALL} rdk_actual)
if(NOT rdk_actual STREQUAL RDK_SHA256)
  message(FATAL_ERROR "${RDK_TARBALL}: sha256 ${rdk_actual}, expected ${RDK_SHA256}; "
    "restore the file from git or, when upgrading, update RDK_SHA256 and the README")
endif()

# Extract and patch again whenever the tarball or a patch changes (the key records both).
set(rdk_key "${RDK_SHA256}")
foreach(p ${RDK_PATCHES})
  file(SHA256 ${p} h)
  string(APPEND rdk_key " ${h}")
endforeach()
set(rdk_stamp ${RDK_ROOT}/extracted.stamp)
set(rdk_old_key "")
if(EXISTS ${rdk_stamp})
  file(READ ${rdk_stamp} rdk_old_key)
endif()
if(NOT rdk_old_key STREQUAL rdk_key OR NOT EXISTS ${RDK_SRC}/src/rdkafka.h)
  message(STATUS "reclass: extracting and patching librdkafka ${RDK_VERSION}")
  file(REMOVE_RECURSE ${RDK_SRC} ${RDK_ROOT}/build ${RDK_ROOT}/include ${RDK_ROOT}/x)
  file(ARCHIVE_EXTRACT INPUT ${RDK_TARBALL} DESTINATION ${RDK_ROOT}/x)
  file(RENAME ${RDK_ROOT}/x/librdkafka-${RDK_VERSION} ${RDK_SRC})
  file(REMOVE_RECURSE ${RDK_ROOT}/x)
  foreach(p ${RDK_PATCHES})
    execute_process(COMMAND ${RDK_PATCH_EXE} -p1 --batch --forward --silent -i ${p}
      WORKING_DIRECTORY ${RDK_SRC} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "librdkafka: ${p} does not apply to ${RDK_VERSION}:\n${out}")
    endif()
  endforeach()
  # reclass includes <librdkafka/rdkafka.h> as with a system install.
  file(COPY ${RDK_SRC}/src/rdkafka.h ${RDK_SRC}/src/rdkafka_mock.h
    DESTINATION ${RDK_ROOT}/include/librdkafka)
  file(WRITE ${rdk_stamp} "${rdk_key}")
endif()

# Only the C library target is built (no rdkafka++, examples or tests). lz4 is the bundled
# copy; SASL PLAIN is always built in and SCRAM comes with OpenSSL, so Cyrus SASL (GSSAPI),
# OAUTHBEARER, curl (OIDC) and plugins stay out. -O2 without NDEBUG: librdkafka's own asserts
# stay on, as in its upstream builds.
if(CMAKE_GENERATOR MATCHES "Makefiles")
  set(rdk_build_cmd $(MAKE) rdkafka) # recursive make shares the parent's -j job slots
else()
  set(rdk_build_cmd ${CMAKE_COMMAND} --build <BINARY_DIR> --target rdkafka)
endif()
include(ExternalProject)
ExternalProject_Add(rdkafka_build
  SOURCE_DIR ${RDK_SRC}
  BINARY_DIR ${RDK_ROOT}/build
  STAMP_DIR ${RDK_ROOT}/ep-stamp
  TMP_DIR ${RDK_ROOT}/ep-tmp
  CMAKE_ARGS
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE=-O2
    -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}
    -DRDKAFKA_BUILD_STATIC=ON -DRDKAFKA_BUILD_EXAMPLES=OFF -DRDKAFKA_BUILD_TESTS=OFF
    -DWITH_SSL=ON -DWITH_ZLIB=ON -DWITH_ZSTD=ON -DENABLE_LZ4_EXT=OFF
    -DWITH_SASL=OFF -DWITH_SASL_SCRAM=ON -DWITH_SASL_OAUTHBEARER=OFF
    -DWITH_CURL=OFF -DWITH_PLUGINS=OFF
  BUILD_COMMAND ${rdk_build_cmd}
  INSTALL_COMMAND ""
  BUILD_BYPRODUCTS ${RDK_LIB}
  LOG_CONFIGURE ON
  LOG_OUTPUT_ON_FAILURE ON)
ExternalProject_Add_StepDependencies(rdkafka_build configure ${rdk_stamp})

add_dependencies(reclass_rdkafka rdkafka_build)
# SYSTEM: its header trips -Wextra (a const-qualified return type), which is not ours to fix.
target_include_directories(reclass_rdkafka SYSTEM INTERFACE ${RDK_ROOT}/include)
target_compile_definitions(reclass_rdkafka INTERFACE LIBRDKAFKA_STATICLIB
  RECLASS_RDKAFKA_VENDORED=1)
target_link_libraries(reclass_rdkafka INTERFACE ${RDK_LIB} OpenSSL::SSL OpenSSL::Crypto
  ZLIB::ZLIB PkgConfig::ZSTD Threads::Threads ${CMAKE_DL_LIBS} m)
message(STATUS "reclass: librdkafka ${RDK_VERSION} vendored (static, ${RDK_ROOT})")
