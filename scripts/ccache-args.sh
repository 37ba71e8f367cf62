# Sourced by scripts/test.sh and scripts/fuzz.sh.  When VSOCKET_CCACHE_DIR
# names a directory (scripts/test-in-fresh-root.sh sets it for CI), sets
# `ccache_args` to the cmake arguments that compile through ccache with its
# cache there; otherwise leaves them empty.  ccache keys an object by the
# preprocessed source, the compiler and every flag, so a hit is the object
# the compiler would make; a header that is missing still fails the build.
# REQUIRES: ccache installed (scripts/install-deps.sh --ccache) when set.
ccache_args=()
if [[ -n ${VSOCKET_CCACHE_DIR:-} ]]; then
  export CCACHE_DIR=$VSOCKET_CCACHE_DIR
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-6G}
  ccache_args=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
