# TR_CHECK_CUDA
# -------------
# The optional CUDA backend, built as a separately loaded module.
#   --with-cuda[=DIR]  build it (an error if DIR lacks nvcc, the CUDA runtime
#                      or cuBLAS)
#   --without-cuda     do not
#   (default)          build it when $CUDA_HOME or /usr/local/cuda has all
#                      three, quietly go without otherwise
# Sets NVCC, NVCCFLAGS, CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS and the
# HAVE_CUDA conditional.
AC_DEFUN([TR_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
      [build the CUDA module with the toolkit in DIR (default: $CUDA_HOME or /usr/local/cuda when present)])],
    [], [with_cuda=guess])
  AC_ARG_VAR([NVCC], [CUDA compiler])
  AC_ARG_VAR([NVCCFLAGS], [flags for the CUDA compiler])
  tr_have_cuda=no
  tr_cuda_dir=
  AS_IF([test "x$with_cuda" != xno], [
    AS_CASE([$with_cuda],
      [yes|guess], [tr_cuda_dir=${CUDA_HOME:-/usr/local/cuda}],
      [tr_cuda_dir=$with_cuda])
    tr_cuda_why=
    AS_IF([test -z "$NVCC"], [
      AS_IF([test -x "$tr_cuda_dir/bin/nvcc"], [NVCC=$tr_cuda_dir/bin/nvcc])])
    AC_MSG_CHECKING([for nvcc])
    AS_IF([test -n "$NVCC"], [AC_MSG_RESULT([$NVCC])],
      [AC_MSG_RESULT([no]); tr_cuda_why="no nvcc in $tr_cuda_dir/bin"])
    tr_cuda_libdir=
    for tr_d in "$tr_cuda_dir/lib64" "$tr_cuda_dir/lib" "$tr_cuda_dir/targets/x86_64-linux/lib"; do
      AS_IF([test -z "$tr_cuda_libdir" && test -e "$tr_d/libcudart.so"], [tr_cuda_libdir=$tr_d])
    done
    AS_IF([test -z "$tr_cuda_why"], [
      tr_save_CPPFLAGS=$CPPFLAGS
      tr_save_LDFLAGS=$LDFLAGS
      CPPFLAGS="$CPPFLAGS -I$tr_cuda_dir/include"
      LDFLAGS="$LDFLAGS -L$tr_cuda_libdir"
      AC_CHECK_HEADER([cuda_runtime_api.h], [], [tr_cuda_why="cuda_runtime_api.h not found in $tr_cuda_dir/include"])
      AS_IF([test -z "$tr_cuda_why"], [
        AC_CHECK_HEADER([cublas_v2.h], [], [tr_cuda_why="cublas_v2.h not found in $tr_cuda_dir/include"])])
      AS_IF([test -z "$tr_cuda_why"], [
        AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [:], [tr_cuda_why="libcudart not found in $tr_cuda_dir"])])
      AS_IF([test -z "$tr_cuda_why"], [
        AC_CHECK_LIB([cublas], [cublasCreate_v2], [:], [tr_cuda_why="libcublas not found in $tr_cuda_dir"])])
      CPPFLAGS=$tr_save_CPPFLAGS
      LDFLAGS=$tr_save_LDFLAGS
    ])
    AS_IF([test -z "$tr_cuda_why"], [tr_have_cuda=yes],
      [test "x$with_cuda" != xguess],
        [AC_MSG_ERROR([--with-cuda: $tr_cuda_why])],
        [AC_MSG_NOTICE([building without CUDA: $tr_cuda_why]); tr_cuda_dir=])
  ])
  AS_IF([test "x$tr_have_cuda" = xyes], [
    AS_IF([test -z "$NVCCFLAGS"], [NVCCFLAGS="-O3"])
    CUDA_CPPFLAGS="-I$tr_cuda_dir/include"
    CUDA_LDFLAGS="-L$tr_cuda_libdir -Xlinker -rpath -Xlinker $tr_cuda_libdir"
    CUDA_LIBS="-lcublas -lcudart"
    AC_DEFINE([TR_HAVE_CUDA], [1], [The CUDA module is built.])
  ])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([CUDA_LIBS])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$tr_have_cuda" = xyes])
])
