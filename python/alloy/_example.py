"""alloy._example — kernel files (the format of examples/*.metal, documented in
examples/README.md) as Python objects. The parsing is the library's own
(``alloy_kernel_file_parse`` in include/alloy/kernel_file.h, reached through
the extension), so Python, the CLI, the tests and the linter read a file the
same way and report the same "path:line: why" errors.

    kf = alloy.load_kernel_file("examples/exp.metal")
    out = kf.kernel()(inputs=[x], template=kf.template_args(T=alloy.float16), ...)
"""
from dataclasses import dataclass, field

from ._alloy import metal_kernel, parse_kernel_file


@dataclass
class KernelFile:
    """The pieces of a kernel file; ``kernel()`` builds the alloy kernel."""
    path: str
    name: str
    input_names: list
    output_names: list
    template: list = field(default_factory=list)  # [(name, int | bool | alloy.Dtype)]
    ensure_row_contiguous: bool = True
    atomic_outputs: bool = False
    header: str = ""
    body: str = ""
    body_line: int = 0  # file line of the body's first line
    header_line: int = 0  # file line of the header's first line (0: no header)

    def kernel(self):
        return metal_kernel(name=self.name, input_names=list(self.input_names),
                            output_names=list(self.output_names), source=self.body,
                            header=self.header, ensure_row_contiguous=self.ensure_row_contiguous,
                            atomic_outputs=self.atomic_outputs)

    def template_args(self, **overrides):
        """The file's template defaults with ``overrides`` replacing or adding
        values, as the ``template=`` list of a call. A string value is read as
        a ``//! template:`` value is (an integer, true/false or a dtype name)."""
        args = dict(self.template)
        for k, v in overrides.items():
            args[k] = parse_template_value(v, k) if isinstance(v, str) else v
        return list(args.items())


def parse_template_value(text, name="X"):
    """'true'/'false' -> bool, an integer (C syntax: -3, 0x10, 010) -> int, else
    a dtype name -> alloy.Dtype; by the library's parser of `//! template:`
    values (alloy.InvalidArgumentError when it is none of these)."""
    probe = f"//! name: t\n//! inputs:\n//! outputs: o\n//! template: {name}={text}\n//! body:\n;\n"
    return parse_kernel_file(probe, "template value")["template"][0][1]


def _from_dict(d):
    return KernelFile(path=d["path"], name=d["name"], input_names=d["inputs"], output_names=d["outputs"],
                      template=d["template"], ensure_row_contiguous=d["ensure_row_contiguous"],
                      atomic_outputs=d["atomic_outputs"], header=d["header"] or "", body=d["body"],
                      body_line=d["body_line"], header_line=d["header_line"])


def parse(text, path="<kernel file>"):
    """Parses the text of a kernel file; errors are alloy.InvalidArgumentError
    ("path:line: why")."""
    return _from_dict(parse_kernel_file(text, str(path)))


def load(path):
    """Reads and parses a kernel file."""
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), str(path))
