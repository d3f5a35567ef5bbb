"""The C parts of seglog: the per-record loops of the record format, and walks over buffers of batches."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "seglog.records._codec",
            sources=["src/seglog/records/_codec.c"],
            depends=["src/seglog/records/_varint.h", "src/seglog/records/_record.h"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wno-unused-function"],
        ),
        Extension(
            "seglog.records._compact",
            sources=["src/seglog/records/_compact.c"],
            depends=["src/seglog/records/_varint.h", "src/seglog/records/_record.h"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wno-unused-function"],
        ),
        Extension(
            "seglog.records._columns",
            sources=["src/seglog/records/_columns.c"],
            depends=["src/seglog/records/_varint.h", "src/seglog/records/_record.h"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wno-unused-function"],
        ),
        Extension(
            "seglog.records._scan",
            sources=["src/seglog/records/_scan.c"],
            depends=["src/seglog/records/_varint.h", "src/seglog/records/_record.h"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wno-unused-function"],
        ),
    ],
)
