# TR_CHECK_BLAS
# -------------
# Finds a CBLAS: OpenBLAS through pkg-config first (Debian keeps its cblas.h
# in a non-default include directory), then a generic `cblas' package, then
# a plain search for cblas_sgemm.  Sets BLAS_CFLAGS and BLAS_LIBS.
AC_DEFUN([TR_CHECK_BLAS], [
  PKG_CHECK_MODULES([BLAS], [openblas], [tr_blas=openblas], [
    PKG_CHECK_MODULES([BLAS], [cblas], [tr_blas=cblas], [tr_blas=search])])
  tr_save_CPPFLAGS=$CPPFLAGS
  tr_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $BLAS_CFLAGS"
  LIBS="$BLAS_LIBS $LIBS"
  AS_IF([test "x$tr_blas" = xsearch], [
    AC_SEARCH_LIBS([cblas_sgemm], [openblas cblas blas], [BLAS_LIBS=$ac_cv_search_cblas_sgemm],
      [AC_MSG_ERROR([no CBLAS library found (Debian: apt-get install libopenblas-dev)])])
    AS_IF([test "x$BLAS_LIBS" = "xnone required"], [BLAS_LIBS=])
  ], [
    AC_CHECK_FUNC([cblas_sgemm], [],
      [AC_MSG_ERROR([$tr_blas was found by pkg-config but cblas_sgemm does not link])])
  ])
  AC_CHECK_HEADER([cblas.h], [],
    [AC_MSG_ERROR([cblas.h not found (Debian: apt-get install libopenblas-dev)])])
  AC_CHECK_FUNCS([openblas_set_num_threads])
  CPPFLAGS=$tr_save_CPPFLAGS
  LIBS=$tr_save_LIBS
  AC_SUBST([BLAS_CFLAGS])
  AC_SUBST([BLAS_LIBS])
])
