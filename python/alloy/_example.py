"""alloy._example — reads a body-only kernel file (the format of
examples/*.metal, documented in examples/README.md) into an alloy kernel and
its default template arguments. The same rules as the C loader the tests and
the CLI use (tests/example_loader.h): directives ``//! key: value`` before
``//! body:``, ``//`` comments and blank lines ignored, ``//! header:`` lines
kept verbatim, the rest of the file after ``//! body:`` is the body.

    kf = alloy.load_kernel_file("examples/exp.metal")
    out = kf.kernel()(inputs=[x], template=kf.template_args(T=alloy.float16), ...)
"""
import re
from dataclasses import dataclass, field

from ._alloy import InvalidArgumentError, dtype, metal_kernel

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DIRECTIVE = re.compile(r"//!\s*([A-Za-z_]+)\s*:(.*)\Z")
_KEYS = {"name", "inputs", "outputs", "template", "ensure_row_contiguous", "atomic_outputs", "header",
         "body"}


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

    def kernel(self):
        return metal_kernel(name=self.name, input_names=list(self.input_names),
                            output_names=list(self.output_names), source=self.body,
                            header=self.header, ensure_row_contiguous=self.ensure_row_contiguous,
                            atomic_outputs=self.atomic_outputs)

    def template_args(self, **overrides):
        """The file's template defaults with ``overrides`` replacing or adding
        values, as the ``template=`` list of a call."""
        args = dict(self.template)
        for k, v in overrides.items():
            args[k] = parse_template_value(v) if isinstance(v, str) else v
        return list(args.items())


def parse_template_value(text):
    """'true'/'false' -> bool, an integer (C syntax: -3, 0x10, 010) -> int, else a dtype name."""
    if text in ("true", "false"):
        return text == "true"
    if text[:1].isdigit() or text[:1] in "+-":
        body = text.lstrip("+-")
        try:
            if re.fullmatch(r"0[0-7]+", body):
                value = int(body, 8)
            else:
                value = int(body, 0)
        except ValueError:
            raise ValueError(f'"{text}" is not an integer') from None
        return -value if text.startswith("-") else value
    try:
        return dtype(text)
    except TypeError:
        raise ValueError(f'"{text}" is neither an integer, true/false nor a dtype') from None


def _names(value, path, line):
    out = []
    for n in re.split(r"[\s,]+", value.strip()):
        if not n:
            continue
        if not _IDENT.match(n):
            raise InvalidArgumentError(f'{path}:{line}: "{n}" is not a valid name (a C identifier)')
        if n in out:
            raise InvalidArgumentError(f'{path}:{line}: name "{n}" appears twice')
        out.append(n)
    return out


def _flag(value, path, line, key):
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise InvalidArgumentError(f"{path}:{line}: {key} must be true or false, not '{value}'")


def parse(text, path="<kernel>"):
    """Parses the text of a kernel file; errors are alloy.InvalidArgumentError
    ("path:line: why")."""
    lines = text.split("\n")
    fields = {"name": None, "inputs": None, "outputs": None}
    template, flags = {}, {"ensure_row_contiguous": True, "atomic_outputs": False}
    header_lines, in_header = None, False
    for i, raw in enumerate(lines):
        line_no = i + 1
        s = raw.strip()
        m = _DIRECTIVE.match(s) if s.startswith("//!") else None
        if s.startswith("//!") and not m:
            raise InvalidArgumentError(f"{path}:{line_no}: malformed directive (expected `//! key: value`)")
        if not m:
            if in_header:
                header_lines.append(raw)
            elif s and not s.startswith("//"):
                raise InvalidArgumentError(
                    f"{path}:{line_no}: expected a `//! key: value` directive, a `//` comment or a blank "
                    "line before `//! body:` (did you forget `//! header:` or `//! body:`?)")
            continue
        key, value = m.group(1), m.group(2).strip()
        if key not in _KEYS:
            raise InvalidArgumentError(f"{path}:{line_no}: unknown directive '{key}'")
        if key == "body":
            if value:
                raise InvalidArgumentError(f"{path}:{line_no}: `//! body:` takes no value")
            for k in ("name", "inputs", "outputs"):
                if fields[k] is None:
                    raise InvalidArgumentError(f"{path}: missing `//! {k}:`")
            if not fields["outputs"]:
                raise InvalidArgumentError(f"{path}: a kernel needs at least one output")
            both = set(fields["inputs"]) & set(fields["outputs"])
            if both:
                raise InvalidArgumentError(f"{path}: '{sorted(both)[0]}' is both an input and an output")
            return KernelFile(path=path, name=fields["name"], input_names=fields["inputs"],
                              output_names=fields["outputs"], template=list(template.items()),
                              ensure_row_contiguous=flags["ensure_row_contiguous"],
                              atomic_outputs=flags["atomic_outputs"],
                              header="\n".join(header_lines) if header_lines is not None else "",
                              body="\n".join(lines[i + 1:]), body_line=line_no + 1)
        if key == "header":
            if value:
                raise InvalidArgumentError(f"{path}:{line_no}: `//! header:` takes no value")
            header_lines, in_header = [], True
        elif key == "name":
            if not _IDENT.match(value):
                raise InvalidArgumentError(f'{path}:{line_no}: kernel name "{value}" is not a C identifier')
            fields["name"] = value
        elif key in ("inputs", "outputs"):
            fields[key] = _names(value, path, line_no)
        elif key == "template":
            for item in value.split():
                name, eq, v = item.partition("=")
                if not eq or not _IDENT.match(name) or not v:
                    raise InvalidArgumentError(f'{path}:{line_no}: template argument "{item}" is not NAME=VALUE')
                try:
                    template[name] = parse_template_value(v)
                except ValueError as e:
                    raise InvalidArgumentError(f"{path}:{line_no}: template argument {name}: {e}") from None
        else:
            flags[key] = _flag(value, path, line_no, key)
    raise InvalidArgumentError(f"{path}: no `//! body:` line")


def load(path):
    """Reads and parses a kernel file."""
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), str(path))
