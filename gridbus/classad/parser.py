"""A Pratt parser for the ClassAd expression language, with HTCondor's precedence table."""

from __future__ import annotations

from gridbus.classad import nodes as N
from gridbus.classad import timefmt
from gridbus.classad.errors import ClassAdParseError
from gridbus.classad.lexer import EOF, INT, NAME, OP, QNAME, REAL, SIGNED, STR, Token, tokenize
from gridbus.classad.values import ERROR, UNDEFINED

# Deeper trees than this are refused with a parse error: nothing a pool writes comes near it, and
# it keeps the recursive parser, compiler and evaluator well inside Python's stack.
MAX_DEPTH = 180

# Binding powers of the binary operators, low to high (HTCondor's table; bitwise as in C).
_BINARY_BP = {
    "||": 2, "&&": 3, "|": 4, "^": 5, "&": 6,
    "==": 7, "!=": 7, "=?=": 7, "=!=": 7, "is": 7, "isnt": 7,
    "<": 8, "<=": 8, ">": 8, ">=": 8,
    "<<": 9, ">>": 9, ">>>": 9,
    "+": 10, "-": 10,
    "*": 11, "/": 11, "%": 11,
}
_UNARY_BP = 12
_KEYWORD_LITERALS = {"true": True, "false": False, "undefined": UNDEFINED, "error": ERROR}


class Parser:
    def __init__(self, text: str, tokens: list[Token] | None = None, start: int = 0):
        self.text = text
        self.toks = tokens if tokens is not None else tokenize(text)
        self.i = start
        self.nesting = 0

    # -- token helpers --------------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Token:
        tok = self.toks[self.i]
        if tok.kind != EOF:
            self.i += 1
        return tok

    def error(self, message: str, tok: Token | None = None) -> ClassAdParseError:
        tok = tok or self.peek()
        return ClassAdParseError(message, self.text, tok.pos)

    def expect_op(self, op: str) -> Token:
        tok = self.next()
        if tok.kind != OP or tok.value != op:
            raise self.error(f"expected {op!r} but found {_describe(tok)}", tok)
        return tok

    def at_op(self, op: str) -> bool:
        tok = self.toks[self.i]
        return tok.kind == OP and tok.value == op

    # -- expressions ----------------------------------------------------------------------
    def expression(self) -> N.Node:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise self.error(f"expression nested deeper than {MAX_DEPTH} levels")
        try:
            node = self.ternary()
        finally:
            self.nesting -= 1
        if node.depth > MAX_DEPTH:
            raise self.error(f"expression nested deeper than {MAX_DEPTH} levels")
        return node

    def ternary(self) -> N.Node:
        cond = self.binary(1)
        if not self.at_op("?"):
            return cond
        self.next()
        then = self.expression()
        self.expect_op(":")
        return N.Conditional(cond, then, self.expression())

    def binary(self, min_bp: int) -> N.Node:
        left = self.unary()
        while True:
            tok = self.toks[self.i]
            if tok.kind == OP:
                op = tok.value
            elif tok.kind == NAME and tok.value.lower() in ("is", "isnt"):
                op = tok.value.lower()
            else:
                return left
            bp = _BINARY_BP.get(op)
            if bp is None or bp < min_bp:
                return left
            self.next()
            right = self.binary(bp + 1)
            if op in ("&&", "||"):
                if isinstance(left, N.Chain) and left.op == op:
                    left = N.Chain(op, left.operands + [right])
                else:
                    left = N.Chain(op, [left, right])
            else:
                left = N.Binary(op, left, right)
            if left.depth > MAX_DEPTH:
                raise self.error(f"expression nested deeper than {MAX_DEPTH} levels", tok)

    def unary(self) -> N.Node:
        tok = self.toks[self.i]
        if tok.kind == OP and tok.value in ("-", "+", "!", "~"):
            self.next()
            nxt = self.toks[self.i]
            # HTCondor folds a minus written against a number into a negative literal.
            if tok.value == "-" and nxt.kind in _NUMBERS and nxt.pos == tok.end:
                self.next()
                return self.postfix(N.Literal(_negated(nxt)))
            self.nesting += 1
            if self.nesting > MAX_DEPTH:
                raise self.error(f"expression nested deeper than {MAX_DEPTH} levels")
            try:
                operand = self.unary()
            finally:
                self.nesting -= 1
            return N.Unary(tok.value, operand)
        return self.postfix(self.primary())

    def postfix(self, node: N.Node) -> N.Node:
        while True:
            tok = self.toks[self.i]
            if tok.kind != OP:
                return node
            if tok.value == ".":
                self.next()
                name = self.next()
                if name.kind not in (NAME, QNAME):
                    raise self.error(f"expected an attribute name after '.' but found {_describe(name)}", name)
                node = N.Select(node, name.value)
            elif tok.value == "[":
                self.next()
                index = self.expression()
                self.expect_op("]")
                node = N.Subscript(node, index)
            elif tok.value == "?" and self.peek(1).kind == OP and self.peek(1).value == ":":
                # The elvis operator binds as tightly as selection in HTCondor's grammar:
                # `1.5 ?: 0 + 1e3` is `(1.5 ?: 0) + 1e3`, and its right side is a primary.
                self.next()
                self.next()
                node = N.Elvis(node, self.postfix_operand())
            else:
                return node
            if node.depth > MAX_DEPTH:
                raise self.error(f"expression nested deeper than {MAX_DEPTH} levels", tok)

    def postfix_operand(self) -> N.Node:
        tok = self.toks[self.i]
        nxt = self.peek(1)
        if tok.kind == OP and tok.value == "-" and nxt.kind in _NUMBERS and nxt.pos == tok.end:
            self.next()
            self.next()
            node: N.Node = N.Literal(_negated(nxt))
        else:
            node = self.primary()
        while True:
            tok = self.toks[self.i]
            if tok.kind == OP and tok.value == ".":
                self.next()
                name = self.next()
                if name.kind not in (NAME, QNAME):
                    raise self.error(f"expected an attribute name after '.' but found {_describe(name)}", name)
                node = N.Select(node, name.value)
            elif tok.kind == OP and tok.value == "[":
                self.next()
                index = self.expression()
                self.expect_op("]")
                node = N.Subscript(node, index)
            else:
                return node

    def primary(self) -> N.Node:
        tok = self.next()
        kind = tok.kind
        if kind == INT or kind == REAL or kind == STR:
            return N.Literal(tok.value)
        if kind == SIGNED:  # digits after a binary minus: no negative literal to fold into
            if tok.value[1]:
                raise self.error("integer literal with a leading zero", tok)
            return N.Literal(0)  # strtoll's overflow answer, as for any other too-large literal
        if kind == QNAME:
            return N.AttrRef(tok.value)
        if kind == NAME:
            low = tok.value.lower()
            if low in _KEYWORD_LITERALS:
                return N.Literal(_KEYWORD_LITERALS[low])
            if self.at_op("("):
                return self.call(tok)
            if low in ("my", "target") and self.at_op("."):
                nxt = self.peek(1)
                if nxt.kind in (NAME, QNAME):
                    self.next()
                    self.next()
                    return N.AttrRef(nxt.value, low, tok.value)
            return N.AttrRef(tok.value)
        if kind == OP:
            if tok.value == "(":
                inner = self.expression()
                self.expect_op(")")
                return N.Paren(inner)
            if tok.value == "{":
                return self.list_literal()
            if tok.value == "[":
                return self.record()
        if kind == EOF:
            raise self.error("unexpected end of expression", tok)
        raise self.error(f"unexpected {_describe(tok)}", tok)

    def call(self, name_tok: Token) -> N.Node:
        self.expect_op("(")
        args: list[N.Node] = []
        if not self.at_op(")"):
            while True:
                args.append(self.expression())
                if self.at_op(","):
                    self.next()
                    continue
                break
        self.expect_op(")")
        name = name_tok.value
        low = name.lower()
        if low in ("abstime", "reltime") and len(args) == 1:
            arg = args[0]
            if isinstance(arg, N.Literal) and type(arg.value) is str:
                folded = _fold_time(low, arg.value)
                if folded is not None:
                    return folded
        return N.Call(name, args)

    def list_literal(self) -> N.Node:
        items: list[N.Node] = []
        if self.at_op("}"):
            self.next()
            return N.ListExpr(items)
        while True:
            items.append(self.expression())
            tok = self.next()
            if tok.kind == OP and tok.value == ",":
                continue
            if tok.kind == OP and tok.value == "}":
                return N.ListExpr(items)
            raise self.error(f"expected ',' or '}}' in a list but found {_describe(tok)}", tok)

    def record(self) -> N.Node:
        """Body of a nested ad after its '[' (also used for whole ads in the new format)."""
        attrs: list[tuple[str, N.Node]] = []
        while True:
            tok = self.next()
            if tok.kind == OP and tok.value == "]":
                return N.RecordExpr(attrs)
            if tok.kind == OP and tok.value == ";":
                continue
            if tok.kind not in (NAME, QNAME):
                raise self.error(f"expected an attribute name or ']' in a ClassAd but found {_describe(tok)}", tok)
            self.expect_op("=")
            attrs.append((tok.value, self.expression()))
            sep = self.peek()
            if sep.kind == OP and sep.value in (";", "]"):
                continue
            raise self.error(f"expected ';' or ']' after attribute {tok.value!r} but found {_describe(sep)}", sep)


def _fold_time(kind: str, text: str) -> N.Node | None:
    if kind == "abstime":
        at = timefmt.parse_abstime(text)
        return None if at is None else N.Literal(at, "abstime")
    rel = timefmt.parse_reltime(text)
    return None if rel is None else N.Literal(rel, "reltime", text)


def _describe(tok: Token) -> str:
    if tok.kind == EOF:
        return "the end of the text"
    if tok.kind == STR:
        return "a string"
    return repr(tok.value)


def parse_expression(text: str) -> N.Node:
    """Parse one whole expression; raises ClassAdParseError (a ValueError)."""
    if not isinstance(text, str):
        raise TypeError(f"expression text must be a str, not {type(text).__name__}")
    p = Parser(text)
    try:
        node = p.expression()
    except RecursionError:
        raise ClassAdParseError("expression too deeply nested", text, 0) from None
    tok = p.peek()
    if tok.kind != EOF:
        raise p.error(f"unexpected {_describe(tok)} after the expression", tok)
    return node


_NUMBERS = (INT, REAL, SIGNED)


def _negated(tok: Token) -> int | float:
    """The negative literal a minus written against a number makes (HTCondor's lexer reads the
    sign with the digits, as strtoll does: `-03` is -3, `-9223372036854775808` is the minimum)."""
    if tok.kind == SIGNED:
        magnitude = tok.value[0]
        return -magnitude if magnitude <= 2**63 else 0
    return -tok.value


def parse_new_ad(text: str) -> list[tuple[str, N.Node]]:
    """The attributes of one ad written as ``[ a = 1; ... ]`` (the whole text)."""
    toks = tokenize(text)
    p = Parser(text, toks)
    first = p.next()
    if first.kind != OP or first.value != "[":
        raise ClassAdParseError("a ClassAd must start with '['", text, first.pos)
    try:
        node = p.record()
    except RecursionError:
        raise ClassAdParseError(f"ClassAd nested deeper than {MAX_DEPTH} levels", text, first.pos) from None
    tok = p.peek()
    if tok.kind != EOF:
        raise ClassAdParseError("unexpected text after the ClassAd", text, tok.pos)
    assert type(node) is N.RecordExpr  # record() makes nothing else
    return node.attrs
