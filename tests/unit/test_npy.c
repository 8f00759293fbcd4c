/*
 * test_npy.c - the .npy reader's preamble and header parser, and the header
 * writer, against headers NumPy wrote.
 *
 * The NumPy headers below were generated once by
 *
 *     /usr/bin/python3 tests/data/make-npy-headers.py
 *
 * (NumPy 1.24, Debian 12's python3-numpy), whose output is pasted between
 * the "generated" markers; this test never runs Python itself.  The
 * malformed headers are written by hand, here.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_impl.h"
#include "tensorrun.h"
#include "tap.h"

/* A string literal and its length, NUL bytes included. */
#define HDR(s) s, sizeof(s) - 1

struct npy_bytes {
    const char *bytes;
    size_t len;
};

struct npy_case {
    const char *name;
    enum tr_dtype dtype;
    bool fortran;
    const char *bytes;
    size_t len;
};

struct unsupported_case {
    const char *typestr;
    uint64_t itemsize;
    const char *bytes;
    size_t len;
};

struct write_case {
    enum tr_dtype dtype;
    int ndim;
    int64_t shape[TR_MAX_DIMS];
    const char *bytes;
    size_t len;
};

/* ------------------------------------------------ generated: begin */
/* every dtype x C/Fortran order x versions 1.0, 2.0, 3.0; shape (2, 3) */
static const struct npy_case numpy_headers[] = {
    {"b1 C 1.0", TR_DTYPE_BOOL, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|b1', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"b1 C 2.0", TR_DTYPE_BOOL, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '|b1', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"b1 C 3.0", TR_DTYPE_BOOL, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '|b1', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"b1 F 1.0", TR_DTYPE_BOOL, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|b1', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"b1 F 2.0", TR_DTYPE_BOOL, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '|b1', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"b1 F 3.0", TR_DTYPE_BOOL, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '|b1', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"u1 C 1.0", TR_DTYPE_U8, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|u1', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"u1 C 2.0", TR_DTYPE_U8, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '|u1', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"u1 C 3.0", TR_DTYPE_U8, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '|u1', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"u1 F 1.0", TR_DTYPE_U8, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"u1 F 2.0", TR_DTYPE_U8, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '|u1', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"u1 F 3.0", TR_DTYPE_U8, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '|u1', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"u2 C 1.0", TR_DTYPE_U16, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<u2', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"u2 C 2.0", TR_DTYPE_U16, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<u2', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"u2 C 3.0", TR_DTYPE_U16, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<u2', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"u2 F 1.0", TR_DTYPE_U16, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<u2', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"u2 F 2.0", TR_DTYPE_U16, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<u2', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"u2 F 3.0", TR_DTYPE_U16, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<u2', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"u4 C 1.0", TR_DTYPE_U32, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<u4', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"u4 C 2.0", TR_DTYPE_U32, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<u4', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"u4 C 3.0", TR_DTYPE_U32, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<u4', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"u4 F 1.0", TR_DTYPE_U32, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<u4', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"u4 F 2.0", TR_DTYPE_U32, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<u4', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"u4 F 3.0", TR_DTYPE_U32, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<u4', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"u8 C 1.0", TR_DTYPE_U64, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<u8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"u8 C 2.0", TR_DTYPE_U64, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<u8', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"u8 C 3.0", TR_DTYPE_U64, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<u8', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"u8 F 1.0", TR_DTYPE_U64, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<u8', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"u8 F 2.0", TR_DTYPE_U64, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<u8', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"u8 F 3.0", TR_DTYPE_U64, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<u8', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"i1 C 1.0", TR_DTYPE_I8, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|i1', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"i1 C 2.0", TR_DTYPE_I8, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '|i1', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"i1 C 3.0", TR_DTYPE_I8, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '|i1', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"i1 F 1.0", TR_DTYPE_I8, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|i1', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"i1 F 2.0", TR_DTYPE_I8, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '|i1', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"i1 F 3.0", TR_DTYPE_I8, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '|i1', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"i2 C 1.0", TR_DTYPE_I16, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<i2', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"i2 C 2.0", TR_DTYPE_I16, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<i2', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"i2 C 3.0", TR_DTYPE_I16, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<i2', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"i2 F 1.0", TR_DTYPE_I16, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"i2 F 2.0", TR_DTYPE_I16, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<i2', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"i2 F 3.0", TR_DTYPE_I16, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<i2', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"i4 C 1.0", TR_DTYPE_I32, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<i4', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"i4 C 2.0", TR_DTYPE_I32, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<i4', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"i4 C 3.0", TR_DTYPE_I32, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<i4', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"i4 F 1.0", TR_DTYPE_I32, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"i4 F 2.0", TR_DTYPE_I32, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<i4', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"i4 F 3.0", TR_DTYPE_I32, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<i4', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"i8 C 1.0", TR_DTYPE_I64, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<i8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"i8 C 2.0", TR_DTYPE_I64, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<i8', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"i8 C 3.0", TR_DTYPE_I64, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<i8', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"i8 F 1.0", TR_DTYPE_I64, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"i8 F 2.0", TR_DTYPE_I64, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<i8', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"i8 F 3.0", TR_DTYPE_I64, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<i8', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"f2 C 1.0", TR_DTYPE_F16, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f2', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"f2 C 2.0", TR_DTYPE_F16, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<f2', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"f2 C 3.0", TR_DTYPE_F16, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<f2', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"f2 F 1.0", TR_DTYPE_F16, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f2', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"f2 F 2.0", TR_DTYPE_F16, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<f2', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"f2 F 3.0", TR_DTYPE_F16, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<f2', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"f4 C 1.0", TR_DTYPE_F32, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"f4 C 2.0", TR_DTYPE_F32, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<f4', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"f4 C 3.0", TR_DTYPE_F32, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<f4', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"f4 F 1.0", TR_DTYPE_F32, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"f4 F 2.0", TR_DTYPE_F32, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<f4', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"f4 F 3.0", TR_DTYPE_F32, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<f4', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"f8 C 1.0", TR_DTYPE_F64, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"f8 C 2.0", TR_DTYPE_F64, false,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<f8', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"f8 C 3.0", TR_DTYPE_F64, false,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<f8', 'fortran_order': False, 'shap"
      "e': (2, 3), }                                                        \n")},
    {"f8 F 1.0", TR_DTYPE_F64, true,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3"
      "), }                                                           \n")},
    {"f8 F 2.0", TR_DTYPE_F64, true,
     HDR(
      "\223NUMPY\002\000t\000\000\000{'descr': '<f8', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
    {"f8 F 3.0", TR_DTYPE_F64, true,
     HDR(
      "\223NUMPY\003\000t\000\000\000{'descr': '<f8', 'fortran_order': True, 'shape"
      "': (2, 3), }                                                         \n")},
};

/* big-endian: np.save of zeros((2, 3), '>..') */
static const struct npy_case numpy_big_endian[] = {
    {">u2", TR_DTYPE_U16, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '>u2', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {">u4", TR_DTYPE_U32, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '>u4', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {">u8", TR_DTYPE_U64, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '>u8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {">i2", TR_DTYPE_I16, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '>i2', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {">i4", TR_DTYPE_I32, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '>i4', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {">i8", TR_DTYPE_I64, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '>i8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {">f2", TR_DTYPE_F16, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '>f2', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {">f4", TR_DTYPE_F32, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '>f4', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {">f8", TR_DTYPE_F64, false,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '>f8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
};

/* zero-size and rank-0 arrays */
static const struct npy_bytes numpy_zero_1d = {
   HDR(
    "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (0,)"
    ", }                                                            \n")};
static const struct npy_bytes numpy_zero_3d = {
   HDR(
    "\223NUMPY\001\000v\000{'descr': '<i8', 'fortran_order': False, 'shape': (2, "
    "0, 3), }                                                       \n")};
static const struct npy_bytes numpy_rank0 = {
   HDR(
    "\223NUMPY\001\000v\000{'descr': '<f8', 'fortran_order': False, 'shape': (), "
    "}                                                              \n")};

/* dtypes the engine lacks: type string and item size */
static const struct unsupported_case numpy_unsupported[] = {
    {"<c8", 8,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<c8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"<f16", 16,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f16', 'fortran_order': False, 'shape': (2,"
      " 3), }                                                         \n")},
    {"<M8[ns]", 8,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<M8[ns]', 'fortran_order': False, 'shape': "
      "(2, 3), }                                                      \n")},
    {"<m8[s]", 8,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<m8[s]', 'fortran_order': False, 'shape': ("
      "2, 3), }                                                       \n")},
    {"|S10", 10,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|S10', 'fortran_order': False, 'shape': (2,"
      " 3), }                                                         \n")},
    {"<U3", 12,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<U3', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"|V8", 8,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|V8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {"|O", 0,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|O', 'fortran_order': False, 'shape': (2, 3"
      "), }                                                           \n")},
    {">c16", 16,
     HDR(
      "\223NUMPY\001\000v\000{'descr': '>c16', 'fortran_order': False, 'shape': (2,"
      " 3), }                                                         \n")},
};

/* the headers np.save writes (tio__npy_header must match) */
static const struct write_case numpy_written[] = {
    {TR_DTYPE_BOOL, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|b1', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_U8, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|u1', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_U16, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<u2', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_U32, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<u4', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_U64, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<u8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_I8, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '|i1', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_I16, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<i2', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_I32, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<i4', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_I64, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<i8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_F16, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f2', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_F32, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_F64, 2, {2, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f8', 'fortran_order': False, 'shape': (2, "
      "3), }                                                          \n")},
    {TR_DTYPE_F32, 0, {0},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (), "
      "}                                                              \n")},
    {TR_DTYPE_F32, 1, {0},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (0,)"
      ", }                                                            \n")},
    {TR_DTYPE_F32, 1, {3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (3,)"
      ", }                                                            \n")},
    {TR_DTYPE_F32, 3, {2, 0, 3},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (2, "
      "0, 3), }                                                       \n")},
    {TR_DTYPE_F32, 8, {1, 2, 3, 4, 5, 6, 7, 8},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (1, "
      "2, 3, 4, 5, 6, 7, 8), }                                        \n")},
    {TR_DTYPE_F32, 1, {9223372036854775807},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (922"
      "3372036854775807,), }                                          \n")},
    {TR_DTYPE_F32, 2, {1, 9223372036854775807},
     HDR(
      "\223NUMPY\001\000v\000{'descr': '<f4', 'fortran_order': False, 'shape': (1, "
      "9223372036854775807), }                                        \n")},
    {TR_DTYPE_F32, 7, {1, 1, 1000, 100000, 100000, 100000, 100000},
     HDR(
      "\223NUMPY\001\000\266\000{'descr': '<f4', 'fortran_order': False, 'shape': ("
      "1, 1, 1000, 100000, 100000, 100000, 100000), }                              "
      "                                                      \n")},
};
/* ------------------------------------------------ generated: end */

static const uint8_t *u8(const char *s)
{
    return (const uint8_t *)s;
}

/* Room for a hand-written stream. */
struct stream {
    uint8_t bytes[4096];
    size_t len;
};

/* A stream of the version major.minor preamble and text as the header,
 * exactly as given (no padding, no newline added). */
static const struct stream *make_npy(unsigned major, unsigned minor, const char *text)
{
    static struct stream s;
    size_t n = strlen(text), pre = major == 1 ? 10 : 12;

    memcpy(s.bytes, "\x93NUMPY", 6);
    s.bytes[6] = (uint8_t)major;
    s.bytes[7] = (uint8_t)minor;
    for (size_t i = 0; i < pre - 8; i++)
        s.bytes[8 + i] = (uint8_t)(n >> (8 * i));
    memcpy(s.bytes + pre, text, n);
    s.len = pre + n;
    return &s;
}

/* The descr np.save writes for an engine dtype. */
static void descr_of(enum tr_dtype dtype, bool big, char *buf, size_t size)
{
    static const char kinds[] = {
        [TR_DTYPE_BOOL] = 'b', [TR_DTYPE_U8] = 'u',  [TR_DTYPE_U16] = 'u',
        [TR_DTYPE_U32] = 'u',  [TR_DTYPE_U64] = 'u', [TR_DTYPE_I8] = 'i',
        [TR_DTYPE_I16] = 'i',  [TR_DTYPE_I32] = 'i', [TR_DTYPE_I64] = 'i',
        [TR_DTYPE_F16] = 'f',  [TR_DTYPE_BF16] = '?', [TR_DTYPE_F32] = 'f',
        [TR_DTYPE_F64] = 'f'};
    size_t n = tr_dtype_size(dtype);

    snprintf(buf, size, "%c%c%zu", n == 1 ? '|' : big ? '>' : '<', kinds[dtype], n);
}

/* Checks an entry against what it should be; "" when it is right, else the
 * first difference. */
static const char *entry_diff(const struct tio_entry *e, bool supported, enum tr_dtype dtype,
                              const char *text, int ndim, const int64_t *shape,
                              const int64_t *strides, uint64_t offset, uint64_t nbytes,
                              bool byteswap)
{
    static char why[256];

    why[0] = '\0';
    if (e->name != NULL)
        snprintf(why, sizeof why, "name is not NULL");
    else if (e->supported != supported)
        snprintf(why, sizeof why, "supported %d", e->supported);
    else if (supported && e->dtype != dtype)
        snprintf(why, sizeof why, "dtype %s", tr_dtype_name(e->dtype));
    else if (strcmp(e->dtype_text, text) != 0)
        snprintf(why, sizeof why, "dtype_text '%s'", e->dtype_text);
    else if (e->ndim != ndim)
        snprintf(why, sizeof why, "ndim %d", e->ndim);
    else if (e->offset != offset)
        snprintf(why, sizeof why, "offset %" PRIu64, e->offset);
    else if (e->nbytes != nbytes)
        snprintf(why, sizeof why, "nbytes %" PRIu64, e->nbytes);
    else if (e->byteswap != byteswap)
        snprintf(why, sizeof why, "byteswap %d", e->byteswap);
    for (int i = 0; !why[0] && i < ndim; i++) {
        if (e->shape[i] != shape[i])
            snprintf(why, sizeof why, "shape[%d] %" PRId64, i, e->shape[i]);
        else if (e->strides[i] != strides[i])
            snprintf(why, sizeof why, "strides[%d] %" PRId64, i, e->strides[i]);
    }
    return why;
}

/* Parses and expects failure with status and a message containing want. */
static void expect_error(const char *name, const uint8_t *buf, uint64_t len, uint64_t stream,
                         tr_status status, const char *want)
{
    struct tio_entry e;
    tr_status got;

    tr_clear_error();
    got = tio__npy_parse(buf, len, stream, &e);
    if (!ok(got == status && strstr(tr_last_error(), want) != NULL, "%s: %s", name,
            tr_last_error()))
        diag("got %s, want %s with \"%s\"", tr_status_name(got), tr_status_name(status), want);
}

/* The same, for a header written by hand. */
static void expect_bad_header(const char *name, unsigned major, const char *text,
                              const char *want)
{
    const struct stream *s = make_npy(major, 0, text);

    expect_error(name, s->bytes, s->len, s->len, TR_ERR_FORMAT, want);
}

static void test_magic(void)
{
    ok(tio__npy_magic(u8(numpy_rank0.bytes), numpy_rank0.len), "magic: a NumPy file");
    ok(tio__npy_magic(u8("\x93NUMPY"), 6), "magic: the six bytes alone");
    ok(!tio__npy_magic(u8("\x93NUMP"), 5), "magic: five bytes are not enough");
    ok(!tio__npy_magic(u8("\x93NUMPx\x01\x00"), 8), "magic: one byte off");
    ok(!tio__npy_magic(NULL, 0), "magic: nothing");
}

static void test_numpy_headers(void)
{
    const int64_t shape[2] = {2, 3}, c_strides[2] = {3, 1}, f_strides[2] = {1, 2};
    size_t n = sizeof numpy_headers / sizeof numpy_headers[0];

    is_int(n, 12 * 2 * 3, "numpy: 12 dtypes x 2 orders x 3 versions");
    for (size_t i = 0; i < n; i++) {
        const struct npy_case *c = &numpy_headers[i];
        uint64_t nbytes = 6 * tr_dtype_size(c->dtype), size = 0;
        struct tio_entry e;
        char text[8];
        const char *why;

        descr_of(c->dtype, false, text, sizeof text);
        tr_clear_error();
        if (tio__npy_header_size(u8(c->bytes), c->len, &size) != TR_OK || size != c->len) {
            ok(0, "numpy %s: header size %" PRIu64 " (%s)", c->name, size, tr_last_error());
            continue;
        }
        if (tio__npy_parse(u8(c->bytes), c->len, c->len + nbytes, &e) != TR_OK) {
            ok(0, "numpy %s: %s", c->name, tr_last_error());
            continue;
        }
        why = entry_diff(&e, true, c->dtype, text, 2, shape, c->fortran ? f_strides : c_strides,
                         c->len, nbytes, false);
        if (!ok(!why[0], "numpy %s: %s, %s order, %" PRIu64 " bytes at %" PRIu64, c->name,
                e.dtype_text, c->fortran ? "Fortran" : "C", e.nbytes, e.offset))
            diag("%s", why);
        /* the data one byte short: the message names the dtype NumPy's way */
        expect_error(c->name, u8(c->bytes), c->len, c->len + nbytes - 1, TR_ERR_FORMAT,
                     "truncated: header says 6 ");
    }
}

static void test_big_endian(void)
{
    const int64_t shape[2] = {2, 3}, strides[2] = {3, 1};

    for (size_t i = 0; i < sizeof numpy_big_endian / sizeof numpy_big_endian[0]; i++) {
        const struct npy_case *c = &numpy_big_endian[i];
        uint64_t nbytes = 6 * tr_dtype_size(c->dtype);
        struct tio_entry e;
        const char *why = "parse failed";

        if (tio__npy_parse(u8(c->bytes), c->len, c->len + nbytes, &e) == TR_OK)
            why = entry_diff(&e, true, c->dtype, c->name, 2, shape, strides, c->len, nbytes,
                             true);
        if (!ok(!why[0], "big-endian %s: byteswap set", c->name))
            diag("%s (%s)", why, tr_last_error());
    }
}

/* A hand-written header that must parse into dtype_text / dtype / byteswap. */
static void expect_descr(const char *descr, bool supported, enum tr_dtype dtype, bool byteswap,
                         uint64_t itemsize)
{
    char text[160];
    const struct stream *s;
    struct tio_entry e;
    const int64_t shape[1] = {4}, strides[1] = {1};
    const char *why = "parse failed";

    snprintf(text, sizeof text, "{'descr': '%s', 'fortran_order': False, 'shape': (4,), }\n",
             descr);
    s = make_npy(1, 0, text);
    if (tio__npy_parse(s->bytes, s->len, s->len + 4 * itemsize, &e) == TR_OK)
        why = entry_diff(&e, supported, dtype, descr, 1, shape, strides, s->len, 4 * itemsize,
                         byteswap);
    if (!ok(!why[0], "descr '%s': %s%s", descr, supported ? tr_dtype_name(dtype) : "unsupported",
            byteswap ? ", byteswapped" : ""))
        diag("%s (%s)", why, tr_last_error());
}

static void test_byte_orders(void)
{
    expect_descr(">u1", true, TR_DTYPE_U8, false, 1);
    expect_descr(">i1", true, TR_DTYPE_I8, false, 1);
    expect_descr(">b1", true, TR_DTYPE_BOOL, false, 1);
    expect_descr("<u1", true, TR_DTYPE_U8, false, 1);
    expect_descr("=f4", true, TR_DTYPE_F32, false, 4);
    expect_descr("|f4", true, TR_DTYPE_F32, false, 4);
    expect_descr("=i8", true, TR_DTYPE_I64, false, 8);
    expect_descr(">f2", true, TR_DTYPE_F16, true, 2);
    expect_descr("<f2", true, TR_DTYPE_F16, false, 2);
}

static void test_zero_and_rank0(void)
{
    const int64_t shape1[1] = {0}, strides1[1] = {1};
    const int64_t shape3[3] = {2, 0, 3}, strides3[3] = {3, 3, 1};
    const int64_t fshape[3] = {2, 0, 3}, fstrides[3] = {1, 2, 2};
    struct tio_entry e;
    const char *why = "parse failed";
    const struct stream *s;

    if (tio__npy_parse(u8(numpy_zero_1d.bytes), numpy_zero_1d.len, numpy_zero_1d.len, &e) ==
        TR_OK)
        why = entry_diff(&e, true, TR_DTYPE_F32, "<f4", 1, shape1, strides1, numpy_zero_1d.len,
                         0, false);
    if (!ok(!why[0], "zero-size (0,): no data needed"))
        diag("%s (%s)", why, tr_last_error());

    why = "parse failed";
    if (tio__npy_parse(u8(numpy_zero_3d.bytes), numpy_zero_3d.len, numpy_zero_3d.len, &e) ==
        TR_OK)
        why = entry_diff(&e, true, TR_DTYPE_I64, "<i8", 3, shape3, strides3, numpy_zero_3d.len,
                         0, false);
    if (!ok(!why[0], "zero-size (2, 0, 3): strides (3, 3, 1), no data"))
        diag("%s (%s)", why, tr_last_error());

    why = "parse failed";
    s = make_npy(1, 0, "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 0, 3), }\n");
    if (tio__npy_parse(s->bytes, s->len, s->len, &e) == TR_OK)
        why = entry_diff(&e, true, TR_DTYPE_I64, "<i8", 3, fshape, fstrides, s->len, 0, false);
    if (!ok(!why[0], "zero-size Fortran (2, 0, 3): strides (1, 2, 2)"))
        diag("%s (%s)", why, tr_last_error());

    why = "parse failed";
    if (tio__npy_parse(u8(numpy_rank0.bytes), numpy_rank0.len, numpy_rank0.len + 8, &e) ==
        TR_OK)
        why = entry_diff(&e, true, TR_DTYPE_F64, "<f8", 0, NULL, NULL, numpy_rank0.len, 8,
                         false);
    if (!ok(!why[0], "rank 0: shape (), one value of 8 bytes"))
        diag("%s (%s)", why, tr_last_error());
    expect_error("rank 0, no data", u8(numpy_rank0.bytes), numpy_rank0.len, numpy_rank0.len,
                 TR_ERR_FORMAT,
                 "truncated: header says 1 float64 value (8 bytes) after offset 128, file has "
                 "128 bytes");
}

static void test_fortran(void)
{
    const int64_t shape[3] = {2, 3, 4}, f_strides[3] = {1, 2, 6}, c_strides[3] = {12, 4, 1};
    const struct stream *s;
    struct tio_entry e;
    const char *why = "parse failed";

    s = make_npy(1, 0, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 4), }\n");
    if (tio__npy_parse(s->bytes, s->len, s->len + 96, &e) == TR_OK)
        why = entry_diff(&e, true, TR_DTYPE_F32, "<f4", 3, shape, f_strides, s->len, 96, false);
    if (!ok(!why[0], "Fortran (2, 3, 4): strides (1, 2, 6)"))
        diag("%s (%s)", why, tr_last_error());
    why = "parse failed";
    s = make_npy(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }\n");
    if (tio__npy_parse(s->bytes, s->len, s->len + 96, &e) == TR_OK)
        why = entry_diff(&e, true, TR_DTYPE_F32, "<f4", 3, shape, c_strides, s->len, 96, false);
    if (!ok(!why[0], "C (2, 3, 4): strides (12, 4, 1)"))
        diag("%s (%s)", why, tr_last_error());
}

static void test_unsupported(void)
{
    const int64_t shape[2] = {2, 3}, strides[2] = {3, 1};
    struct tio_entry e;
    const struct stream *s;

    for (size_t i = 0; i < sizeof numpy_unsupported / sizeof numpy_unsupported[0]; i++) {
        const struct unsupported_case *c = &numpy_unsupported[i];
        uint64_t nbytes = 6 * c->itemsize;
        const char *why = "parse failed";
        char want[128];

        if (tio__npy_parse(u8(c->bytes), c->len, c->len + nbytes, &e) == TR_OK)
            why = entry_diff(&e, false, TR_DTYPE_COUNT, c->typestr, 2, shape, strides, c->len,
                             nbytes, false);
        if (!ok(!why[0], "unsupported %s: listed, %" PRIu64 " bytes, not an error", c->typestr,
                nbytes))
            diag("%s (%s)", why, tr_last_error());
        if (nbytes > 0) {
            snprintf(want, sizeof want, "header says 6 %s values (%" PRIu64 " bytes)",
                     c->typestr, nbytes);
            expect_error(c->typestr, u8(c->bytes), c->len, c->len + nbytes - 1, TR_ERR_FORMAT,
                         want);
        }
    }
    /* dtype_text keeps what fits of a long type string */
    s = make_npy(1, 0, "{'descr': '<M8[1000000000000000000000ns]', 'fortran_order': False, "
                       "'shape': (2,), }\n");
    ok(tio__npy_parse(s->bytes, s->len, s->len + 16, &e) == TR_OK && !e.supported &&
           strcmp(e.dtype_text, "<M8[1000000000000000000") == 0 && e.nbytes == 16,
       "unsupported: a long type string is cut to the buffer: '%s'", e.dtype_text);
    expect_descr("|S0", false, TR_DTYPE_COUNT, false, 0);
    expect_descr("|O8", false, TR_DTYPE_COUNT, false, 0);
    expect_descr("<M8", false, TR_DTYPE_COUNT, false, 8);
    expect_descr("<m8[10ms]", false, TR_DTYPE_COUNT, false, 8);
    expect_descr("<c32", false, TR_DTYPE_COUNT, false, 32);
    expect_descr("|a5", false, TR_DTYPE_COUNT, false, 5);
    expect_bad_header("U overflow", 1,
                      "{'descr': '<U9223372036854775807', 'fortran_order': False, "
                      "'shape': (1,), }\n",
                      "not a NumPy type string");
}

/* Structured dtypes and ranks past TR_MAX_DIMS are listed, not refused. */
static void test_readable_unsupported(void)
{
    struct tio_entry e;
    const struct stream *s;

    /* np.dtype([('a', '<f4'), ('b', '<i8', (2,)), ('c', [('x', '|u1'), ('', '|V3')])]) */
    s = make_npy(1, 0, "{'descr': [('a', '<f4'), ('b', '<i8', (2,)), "
                       "('c', [('x', '|u1'), ('', '|V3')])], 'fortran_order': False, "
                       "'shape': (5,), }\n");
    ok(tio__npy_parse(s->bytes, s->len, s->len + 5 * 24, &e) == TR_OK && !e.supported &&
           strcmp(e.dtype_text, "|V24") == 0 && e.nbytes == 5 * 24 && e.ndim == 1 &&
           e.shape[0] == 5 && !e.big_endian,
       "structured dtype: listed as |V24, 120 bytes (%s)", tr_last_error());
    s = make_npy(1, 0, "{'descr': [(('title', 'a'), '>f8'), ('o', '|O')], "
                       "'fortran_order': False, 'shape': (2, 2), }\n");
    ok(tio__npy_parse(s->bytes, s->len, s->len + 4 * 16, &e) == TR_OK && !e.supported &&
           strcmp(e.dtype_text, "|V16") == 0 && e.nbytes == 64,
       "structured dtype with a titled field and an object: |V16 (%s)", tr_last_error());
    expect_error("structured, data cut short", s->bytes, s->len, s->len + 63, TR_ERR_FORMAT,
                 "truncated: header says 4 |V16 values (64 bytes)");

    s = make_npy(1, 0, "{'descr': '>f4', 'fortran_order': False, "
                       "'shape': (1, 2, 1, 1, 1, 1, 1, 1, 3, 1), }\n");
    ok(tio__npy_parse(s->bytes, s->len, s->len + 24, &e) == TR_OK && !e.supported &&
           e.ndim == 0 && e.wide_ndim == 10 && e.wide_shape && e.wide_shape[1] == 2 &&
           e.wide_shape[8] == 3 && e.wide_shape[10 + 1] == 3 && e.wide_shape[10 + 9] == 1 &&
           e.nbytes == 24 && e.big_endian && !e.byteswap && strcmp(e.dtype_text, ">f4") == 0,
       "10 dimensions: listed with the whole shape and strides (%s)", tr_last_error());
    tio__entry_clear(&e);
    ok(e.wide_shape == NULL && e.wide_ndim == 0, "tio__entry_clear frees the wide shape");
    expect_error("10 dimensions, data cut short", s->bytes, s->len, s->len + 23, TR_ERR_FORMAT,
                 "truncated: header says 6 float32 values (24 bytes)");
}

static void test_lenient(void)
{
    static const struct {
        const char *name;
        unsigned major;
        const char *text;
    } cases[] = {
        {"double quotes", 1, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3,)}\n"},
        {"keys in any order", 1, "{'shape': (3,), 'descr': '<f4', 'fortran_order': False}\n"},
        {"no spaces", 1, "{'descr':'<f4','fortran_order':False,'shape':(3,),}\n"},
        {"spaces everywhere", 3,
         " { 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 3 , ) , } \n"},
        {"tabs and newlines", 2,
         "{\n\t'descr':\t'<f4',\n 'fortran_order': False,\r\n 'shape': (\n3,\n)\n}\n"},
        {"no newline at the end", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}"},
        {"trailing blank lines", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}   \n\n  \n"},
        {"Python 2 long in 1.0", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L,)}\n"},
        {"Python 2 long in 2.0", 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L,)}\n"},
    };
    const int64_t shape[1] = {3}, strides[1] = {1};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct stream *s = make_npy(cases[i].major, 0, cases[i].text);
        struct tio_entry e;
        const char *why = "parse failed";

        if (tio__npy_parse(s->bytes, s->len, s->len + 12, &e) == TR_OK)
            why = entry_diff(&e, true, TR_DTYPE_F32, "<f4", 1, shape, strides, s->len, 12, false);
        if (!ok(!why[0], "accepted: %s", cases[i].name))
            diag("%s (%s)", why, tr_last_error());
    }
    /* a shape tuple with and without its trailing comma */
    {
        const struct stream *s =
            make_npy(1, 0, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3,), }\n");
        struct tio_entry e;

        ok(tio__npy_parse(s->bytes, s->len, s->len + 12, &e) == TR_OK && e.ndim == 2 &&
               e.shape[0] == 2 && e.shape[1] == 3,
           "accepted: (2, 3,)");
    }
    /* extra bytes after the data are allowed, as NumPy allows them */
    ok(tio__npy_parse(u8(numpy_rank0.bytes), numpy_rank0.len, numpy_rank0.len + 100,
                      &(struct tio_entry){0}) == TR_OK,
       "accepted: bytes after the data");
}

static void test_preamble_errors(void)
{
    static const struct {
        const char *name;
        const char *bytes;
        size_t len;
        const char *want;
    } cases[] = {
        {"empty input", "", 0, "empty file"},
        {"bad magic", "\x93NUMPX\x01\x00\x10\x00{}", 12, "not a .npy file: it starts with "
                                                        "'\\x93NUMPX'"},
        {"a PNG", "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16, "not a .npy file"},
        {"truncated magic", "\x93NUM", 4, "truncated: 4 bytes"},
        {"magic without version", "\x93NUMPY\x01", 7, "truncated: 7 bytes"},
        {"version 1.1", "\x93NUMPY\x01\x01\x10\x00", 10, "unsupported .npy format version 1.1"},
        {"version 0.0", "\x93NUMPY\x00\x00\x10\x00", 10, "unsupported .npy format version 0.0"},
        {"version 0.1", "\x93NUMPY\x00\x01\x10\x00", 10, "unsupported .npy format version 0.1"},
        {"version 2.2", "\x93NUMPY\x02\x02\x10\x00\x00\x00", 12,
         "unsupported .npy format version 2.2"},
        {"version 255.255", "\x93NUMPY\xff\xff\x10\x00\x00\x00", 12,
         "unsupported .npy format version 255.255"},
        {"version 4.0", "\x93NUMPY\x04\x00\x10\x00\x00\x00", 12,
         "unsupported .npy format version 4.0"},
        {"1.0 preamble cut", "\x93NUMPY\x01\x00\x10", 9, "too short for the 10-byte preamble"},
        {"2.0 preamble cut", "\x93NUMPY\x02\x00\x10\x00", 10,
         "too short for the 12-byte preamble of a version 2.0"},
        {"header over the limit (2.0)", "\x93NUMPY\x02\x00\x01\x00\x10\x00", 12,
         "the .npy header is 1048577 bytes long, over the limit of 1048576 bytes"},
        {"header over the limit (3.0)", "\x93NUMPY\x03\x00\xff\xff\xff\xff", 12,
         "the .npy header is 4294967295 bytes long"},
    };
    uint64_t size = 1;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tr_status st;

        tr_clear_error();
        st = tio__npy_header_size(u8(cases[i].bytes), cases[i].len, &size);
        if (!ok(st == TR_ERR_FORMAT && strstr(tr_last_error(), cases[i].want) && size == 0,
                "preamble, %s: %s", cases[i].name, tr_last_error()))
            diag("want \"%s\"", cases[i].want);
        /* the parser reports the same */
        expect_error(cases[i].name, u8(cases[i].bytes), cases[i].len, cases[i].len,
                     TR_ERR_FORMAT, cases[i].want);
    }
    ok(tio__npy_header_size(u8("\x93NUMPY\x02\x00\x00\x00\x10\x00"), 12, &size) == TR_OK &&
           size == 12 + (UINT64_C(1) << 20),
       "preamble: a header of exactly 1 MiB is within the limit");
    ok(tio__npy_header_size(u8("\x93NUMPY\x01\x00\xff\xff"), 10, &size) == TR_OK &&
           size == 10 + 65535,
       "preamble: the largest 1.0 header");

    /* the header length reaches past the end of the data */
    {
        const char bytes[] = "\x93NUMPY\x01\x00\x88\x13{'descr': '<f4', 'fortran_order': "
                             "False, 'shape': (3,), }\n";

        expect_error("header length past the data", u8(bytes), sizeof bytes - 1,
                     sizeof bytes - 1, TR_ERR_FORMAT,
                     "truncated: the preamble says the header ends at offset 5010, file has "
                     "68 bytes");
        expect_error("caller gave too few bytes", u8(bytes), sizeof bytes - 1, 100000,
                     TR_ERR_INVALID, "only 68 were given");
    }
}

static void test_key_errors(void)
{
    expect_bad_header("missing key shape", 1, "{'descr': '<f4', 'fortran_order': False, }\n",
                      "malformed .npy header: missing key 'shape'");
    expect_bad_header("missing key descr", 1, "{'fortran_order': False, 'shape': (3,), }\n",
                      "malformed .npy header: missing key 'descr'");
    expect_bad_header("missing key fortran_order", 1, "{'descr': '<f4', 'shape': (3,), }\n",
                      "malformed .npy header: missing key 'fortran_order'");
    expect_bad_header("empty dict", 1, "{}\n", "missing key 'descr'");
    expect_bad_header("extra key", 1,
                      "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1, }\n",
                      "unexpected key 'extra' (the keys are 'descr', 'fortran_order' and "
                      "'shape') at column 57");
    expect_bad_header("duplicate key", 1,
                      "{'descr': '<f4', 'shape': (3,), 'fortran_order': False, 'shape': (3,)}\n",
                      "duplicate key 'shape' at column 57");
    expect_bad_header("unquoted key", 1, "{descr: '<f4', 'fortran_order': False, 'shape': (3,)}\n",
                      "expected a quoted key or '}', found 'descr' at column 2");
    expect_bad_header("key of another case", 1,
                      "{'Descr': '<f4', 'fortran_order': False, 'shape': (3,)}\n",
                      "unexpected key 'Descr'");
}

static void test_dict_errors(void)
{
    static const struct {
        const char *name;
        unsigned major;
        const char *text;
        const char *want;
    } cases[] = {
        {"unterminated string", 1, "{'descr': '<f4', 'fortran_order': False, 'shape: (3,), }\n",
         "unterminated string at column 42"},
        {"unterminated string at the end", 1, "{'descr': '<f4", "unterminated string at column 11"},
        {"string across a newline", 1, "{'descr': '<f4\n', 'fortran_order': False}\n",
         "unterminated string at column 11"},
        {"missing colon", 1, "{'descr' '<f4', 'fortran_order': False, 'shape': (3,), }\n",
         "expected ':' after the key 'descr', found ''' at column 10"},
        {"bad bool", 1, "{'descr': '<f4', 'fortran_order': false, 'shape': (3,), }\n",
         "expected True or False as the value of 'fortran_order', found 'false' at column 35"},
        {"bool as a number", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }\n",
         "expected True or False as the value of 'fortran_order', found '0'"},
        {"negative dim", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }\n",
         "negative dimension '-1' in 'shape' at column 52"},
        {"float dim", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3.0,), }\n",
         "dimension '3.0' in 'shape' is not a decimal integer"},
        {"exponent dim", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1e3,), }\n",
         "dimension '1e3' in 'shape' is not a decimal integer"},
        {"hex dim", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0x10,), }\n",
         "dimension '0x10' in 'shape' is not a decimal integer"},
        {"leading zero", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (03,), }\n",
         "dimension '03' in 'shape' has a leading zero"},
        {"Python 2 long in 3.0", 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L,)}\n",
         "dimension '3L' in 'shape' is not a decimal integer"},
        {"nested junk", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': ((3, 4),), }\n",
         "expected a dimension (a non-negative integer) in 'shape', found '(' at column 52"},
        {"shape as a list", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4], }\n",
         "expected a tuple such as (2, 3) as the value of 'shape', found '['"},
        {"one-element tuple without comma", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (3), }\n",
         "'shape' is not a tuple: a one-dimensional shape is written (3,)"},
        {"empty tuple with a comma", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (,)}\n",
         "expected a dimension (a non-negative integer) in 'shape', found ','"},
        {"unclosed tuple", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4}\n",
         "expected ',' or ')' in 'shape', found '}'"},
        {"missing closing brace", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), \n",
         "expected a quoted key or '}', found the end of the header"},
        {"missing comma", 1, "{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}\n",
         "expected ',' or '}' after the value of 'descr', found ''' at column 17"},
        {"junk after shape", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4) x}\n",
         "expected ',' or '}' after the value of 'shape', found 'x' at column 58"},
        {"double comma", 1, "{'descr': '<f4',, 'fortran_order': False, 'shape': (3,)}\n",
         "expected a quoted key or '}', found ','"},
        {"trailing garbage", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } x\n",
         "unexpected 'x' after the dict at column 59"},
        {"control byte after the dict", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}\n\x01",
         "unexpected byte 0x01 after the dict"},
        {"two dicts", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}{}\n",
         "unexpected '{' after the dict"},
        {"too many dims", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
         "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
         "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), }\n",
         "'shape' has more than 64 dimensions"},
        {"overflowing dim", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,), }\n",
         "dimension '9223372036854775808' in 'shape' is too large (over 9223372036854775807)"},
        {"overflowing product", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }\n",
         "shape (4611686018427387904, 4) of float32 values is too large"},
        {"overflowing product of an empty array", 1,
         "{'descr': '<u1', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }\n",
         "shape (0, 4294967296, 4294967296) of uint8 values is too large"},
        {"overflowing bytes", 1,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }\n",
         "is too large"},
        {"not a type string", 1, "{'descr': 'float32', 'fortran_order': False, 'shape': (3,)}\n",
         "'descr' is 'float32', not a NumPy type string such as '<f4' at column 11"},
        {"bad size", 1, "{'descr': '<f3', 'fortran_order': False, 'shape': (3,)}\n",
         "'descr' is '<f3', not a NumPy type string"},
        {"bad kind", 1, "{'descr': '<x4', 'fortran_order': False, 'shape': (3,)}\n",
         "'descr' is '<x4', not a NumPy type string"},
        {"bad unit", 1, "{'descr': '<M8[light-years]', 'fortran_order': False, 'shape': (3,)}\n",
         "not a NumPy type string"},
        {"descr not a string", 1, "{'descr': 4, 'fortran_order': False, 'shape': (3,)}\n",
         "expected a quoted type string such as '<f4' as the value of 'descr', found '4'"},
        {"structured dtype, bad field", 1,
         "{'descr': [('a', '<f4'), ('b', 4)], 'fortran_order': False, 'shape': (3,), }\n",
         "expected a field's type string such as '<f4', found '4'"},
        {"structured dtype, no name", 1,
         "{'descr': [('<f4',)], 'fortran_order': False, 'shape': (3,), }\n",
         "expected a field's type string such as '<f4', found ')'"},
        {"subarray dtype", 1,
         "{'descr': ('<f4', (2,)), 'fortran_order': False, 'shape': (3,), }\n",
         "subarray dtypes are not supported"},
        {"escape in a string", 1, "{'descr': '\\x3cf4', 'fortran_order': False, 'shape': (3,)}\n",
         "escape sequences in strings are not supported at column 12"},
        {"non-ASCII in a string", 3, "{'descr': '<f4\xc3\xa9', 'fortran_order': False}\n",
         "unexpected byte 0xc3 in a string at column 15"},
        {"non-ASCII outside strings", 1, "{\xa0'descr': '<f4'}\n", "found byte 0xa0 at column 2"},
        {"string prefix", 1, "{b'descr': '<f4', 'fortran_order': False, 'shape': (3,)}\n",
         "expected a quoted key or '}', found 'b'"},
        {"implicit concatenation", 1,
         "{'descr': '<f4' '', 'fortran_order': False, 'shape': (3,)}\n",
         "expected ',' or '}' after the value of 'descr', found '''"},
        {"not a dict", 1, "[('descr', '<f4')]\n", "expected '{' (the header is a dict), found '['"},
        {"empty header", 1, "", "expected '{' (the header is a dict), found the end of the header"},
        {"blank header", 1, "        \n", "found the end of the header"},
        {"comment", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} # hi\n",
         "unexpected '#' after the dict"},
        {"error on line 3", 1, "{'descr': '<f4',\n 'fortran_order': False,\n 'shape': (3,);}\n",
         "expected ',' or '}' after the value of 'shape', found ';' at line 3, column 15"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_bad_header(cases[i].name, cases[i].major, cases[i].text, cases[i].want);
}

static void test_truncated_data(void)
{
    const struct stream *s;
    int64_t shape[1] = {268435456};
    char *hdr = NULL;
    size_t len = 0;

    /* the message, exactly, in the form tensorrun(1) shows */
    if (!ok(tio__npy_header(TR_DTYPE_F32, 1, shape, &hdr, &len) == TR_OK && len == 128,
            "truncated: a 1 GiB float32 header"))
        return;
    tr_clear_error();
    ok(tio__npy_parse(u8(hdr), len, 1000000000, &(struct tio_entry){0}) == TR_ERR_FORMAT &&
           strcmp(tr_last_error(),
                  "truncated: header says 268435456 float32 values (1073741824 bytes) after "
                  "offset 128, file has 1000000000 bytes") == 0,
       "truncated: %s", tr_last_error());
    ok(tio__npy_parse(u8(hdr), len, 128 + UINT64_C(1073741824), &(struct tio_entry){0}) == TR_OK,
       "truncated: the exact size is enough");
    free(hdr);

    s = make_npy(1, 0, "{'descr': '<i2', 'fortran_order': True, 'shape': (5, 7), }\n");
    expect_error("data one byte short", s->bytes, s->len, s->len + 69, TR_ERR_FORMAT,
                 "truncated: header says 35 int16 values (70 bytes) after offset 69, file has "
                 "138 bytes");
    expect_error("no data at all", s->bytes, s->len, s->len, TR_ERR_FORMAT,
                 "truncated: header says 35 int16 values (70 bytes) after offset 69, file has "
                 "69 bytes");
    s = make_npy(1, 0, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }\n");
    expect_error("bool one byte short", s->bytes, s->len, s->len + 2, TR_ERR_FORMAT,
                 "header says 3 bool values (3 bytes)");
    s = make_npy(1, 0, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }\n");
    expect_error("float16 one byte short", s->bytes, s->len, s->len + 5, TR_ERR_FORMAT,
                 "header says 3 float16 values (6 bytes)");
}

/* A 2.0 file whose header is 1 MiB + 1 long, present in full. */
static void test_huge_header(void)
{
    size_t hlen = ((size_t)1 << 20) + 1, total = 12 + hlen;
    uint8_t *buf = malloc(total);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }";

    if (!buf) {
        skip("out of memory for the 1 MiB header");
        return;
    }
    memcpy(buf, "\x93NUMPY\x02\x00", 8);
    for (int i = 0; i < 4; i++)
        buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    memset(buf + 12, ' ', hlen);
    memcpy(buf + 12, dict, strlen(dict));
    buf[total - 1] = '\n';
    expect_error("header of 1 MiB + 1", buf, total, total, TR_ERR_FORMAT,
                 "over the limit of 1048576 bytes");
    /* one byte less is within the limit, and parses */
    hlen--;
    for (int i = 0; i < 4; i++)
        buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    tr_clear_error();
    ok(tio__npy_parse(buf, total - 1, total - 1, &(struct tio_entry){0}) == TR_OK,
       "a header of exactly 1 MiB parses: %s", tr_last_error());
    free(buf);
}

static void test_write(void)
{
    for (size_t i = 0; i < sizeof numpy_written / sizeof numpy_written[0]; i++) {
        const struct write_case *c = &numpy_written[i];
        char *hdr = NULL, shape_text[200];
        size_t len = 0, used = 0;
        tr_status st = tio__npy_header(c->dtype, c->ndim, c->shape, &hdr, &len);

        used += (size_t)snprintf(shape_text, sizeof shape_text, "(");
        for (int d = 0; d < c->ndim; d++)
            used += (size_t)snprintf(shape_text + used, sizeof shape_text - used, "%s%" PRId64,
                                     d ? ", " : "", c->shape[d]);
        snprintf(shape_text + used, sizeof shape_text - used, "%s)", c->ndim == 1 ? "," : "");
        if (!ok(st == TR_OK && len == c->len && memcmp(hdr, c->bytes, len) == 0,
                "write %s %s: NumPy's %zu bytes", tr_dtype_name(c->dtype), shape_text, c->len)) {
            diag("status %s, %zu bytes: %s", tr_status_name(st), len, tr_last_error());
            if (hdr)
                diag("got  %.*s", (int)len - 10, hdr + 10);
            diag("want %.*s", (int)c->len - 10, c->bytes + 10);
        }
        free(hdr);
    }
}

static void test_write_round_trip(void)
{
    static const int64_t shapes[][TR_MAX_DIMS] = {
        {0}, {7}, {2, 3}, {0, 5}, {1, 2, 3, 4, 5, 6, 7, 8}};
    static const int ndims[] = {0, 1, 2, 2, 8};
    int failures = 0;

    for (int t = 0; t < TR_DTYPE_COUNT; t++) {
        if (t == TR_DTYPE_BF16)
            continue;
        for (size_t k = 0; k < sizeof ndims / sizeof ndims[0]; k++) {
            char *hdr = NULL;
            size_t len = 0;
            struct tio_entry e;
            uint64_t numel = 1;
            int64_t strides[TR_MAX_DIMS], s = 1;
            const char *why = "write failed";

            for (int d = ndims[k] - 1; d >= 0; d--) {
                strides[d] = s;
                s *= shapes[k][d] > 1 ? shapes[k][d] : 1;
                numel *= (uint64_t)shapes[k][d];
            }
            if (tio__npy_header((enum tr_dtype)t, ndims[k], shapes[k], &hdr, &len) == TR_OK) {
                char text[8];

                descr_of((enum tr_dtype)t, false, text, sizeof text);
                why = "parse failed";
                if (len % 64 != 0)
                    why = "data not aligned to 64";
                else if (tio__npy_parse(u8(hdr), len, len + numel * tr_dtype_size((enum tr_dtype)t),
                                        &e) == TR_OK)
                    why = entry_diff(&e, true, (enum tr_dtype)t, text, ndims[k], shapes[k],
                                     strides, len, numel * tr_dtype_size((enum tr_dtype)t),
                                     false);
            }
            if (why[0]) {
                failures++;
                diag("%s rank %d: %s (%s)", tr_dtype_name((enum tr_dtype)t), ndims[k], why,
                     tr_last_error());
            }
            free(hdr);
        }
    }
    is_int(failures, 0, "write: every dtype and shape written reads back, data at 64");
}

static void test_write_errors(void)
{
    int64_t shape[TR_MAX_DIMS + 1] = {2, 3, 1, 1, 1, 1, 1, 1, 1};
    int64_t negative[2] = {2, -3};
    char *hdr = (char *)1;
    size_t len = 1;

    tr_clear_error();
    ok(tio__npy_header(TR_DTYPE_BF16, 2, shape, &hdr, &len) == TR_ERR_DTYPE && hdr == NULL &&
           len == 0 && strstr(tr_last_error(), "bf16") && strstr(tr_last_error(), "cast") &&
           strstr(tr_last_error(), ".safetensors"),
       "write bf16: refused: %s", tr_last_error());
    ok(tio__npy_header(TR_DTYPE_COUNT, 2, shape, &hdr, &len) == TR_ERR_DTYPE && hdr == NULL,
       "write: an invalid dtype: %s", tr_last_error());
    ok(tio__npy_header(TR_DTYPE_F32, TR_MAX_DIMS + 1, shape, &hdr, &len) == TR_ERR_INVALID &&
           hdr == NULL,
       "write: 9 dimensions: %s", tr_last_error());
    ok(tio__npy_header(TR_DTYPE_F32, -1, shape, &hdr, &len) == TR_ERR_INVALID,
       "write: rank -1: %s", tr_last_error());
    ok(tio__npy_header(TR_DTYPE_F32, 2, negative, &hdr, &len) == TR_ERR_INVALID,
       "write: a negative dimension: %s", tr_last_error());
    ok(tio__npy_header(TR_DTYPE_F32, 0, NULL, &hdr, &len) == TR_OK && len == 128,
       "write: rank 0 needs no shape");
    free(hdr);
}

int main(void)
{
    test_magic();
    test_numpy_headers();
    test_big_endian();
    test_byte_orders();
    test_zero_and_rank0();
    test_fortran();
    test_unsupported();
    test_readable_unsupported();
    test_lenient();
    test_preamble_errors();
    test_key_errors();
    test_dict_errors();
    test_truncated_data();
    test_huge_header();
    test_write();
    test_write_round_trip();
    test_write_errors();
    return done_testing();
}
