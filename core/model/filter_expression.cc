#include "core/model/filter_expression.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "core/common/names.h"

namespace kls {
namespace filter_internal {

enum class CmpOp { kEq, kNe, kLt, kLe, kGt, kGe };

enum class NodeKind {
  kConst,        // `value` for every item
  kPresent,      // `value` == whether the item has a value in `column`
  kAnd,          // all of `children`
  kOr,           // any of `children`
  kNot,          // not children[0]
  kBool,         // column value == `value`
  kIntCmp,       // ints (or the index when column is null) op int_value
  kIntIn,        // ints (or the index) in int_list, negated when `value`
  kFloatCmp,     // floats op float_value
  kFloatIntCmp,  // floats op int_value, compared exactly (int_value is no double)
  kFloatIn,      // floats in float_list, negated when `value`
  kStringCmp,    // strings (or the keys when column is null) op string_value
  kStringIn,     // strings (or the keys) in string_list, negated when `value`
};

}  // namespace filter_internal

using filter_internal::CmpOp;
using filter_internal::NodeKind;

struct ItemFilter::Node {
  NodeKind kind = NodeKind::kConst;
  CmpOp op = CmpOp::kEq;
  bool value = false;
  const AttributeColumn* column = nullptr;
  const std::vector<std::string>* keys = nullptr;
  int64_t int_value = 0;
  double float_value = 0;
  std::string string_value;
  std::vector<int64_t> int_list;        // sorted, unique
  std::vector<double> float_list;       // sorted
  std::vector<std::string> string_list; // sorted, unique
  std::vector<int> children;
};

using Node = ItemFilter::Node;

ItemFilter::ItemFilter(ItemFilter&&) noexcept = default;
ItemFilter& ItemFilter::operator=(ItemFilter&&) noexcept = default;
ItemFilter::~ItemFilter() = default;

namespace {

constexpr double kTwo63 = 9223372036854775808.0;  // 2^63, the first double above every int64

// ---- Tokens ---------------------------------------------------------------

enum class Tok {
  kEnd, kName, kString, kNumber, kOp, kLParen, kRParen, kLBracket, kRBracket, kComma,
  kAnd, kOr, kNot, kIn, kTrue, kFalse,
};

struct Token {
  Tok kind = Tok::kEnd;
  size_t offset = 0;    // byte offset in the expression
  size_t length = 0;    // bytes
  std::string text;     // kName: the name; kString: the unescaped value
  CmpOp op = CmpOp::kEq;
  bool is_int = false;  // kNumber: written without '.' or exponent
  int64_t int_value = 0;
  double float_value = 0;
};

bool IsNameStart(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  /// 1-based character column of byte `offset` (UTF-8 continuation bytes do not count).
  size_t Column(size_t offset) const {
    size_t column = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if ((static_cast<unsigned char>(text_[i]) & 0xc0) != 0x80) ++column;
    }
    return column + (offset > text_.size() ? offset - text_.size() : 0);
  }

  Status ErrorAt(size_t offset, const std::string& message) const {
    return InvalidArgumentError("filter: column " + std::to_string(Column(offset)) + ": " + message);
  }

  /// The source text of `t` (for numbers and operators in messages).
  std::string_view Text(const Token& t) const { return text_.substr(t.offset, t.length); }

  /// How a token is named in "found ..." messages.
  std::string Describe(const Token& t) const {
    switch (t.kind) {
      case Tok::kEnd: return "end of input";
      case Tok::kName: return "name " + QuoteForMessage(t.text);
      case Tok::kString: return "string " + QuoteForMessage(t.text);
      case Tok::kNumber: return "number " + std::string(Text(t));
      default: return "'" + std::string(Text(t)) + "'";
    }
  }

  StatusOr<Token> Next() {
    while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
    Token t;
    t.offset = pos_;
    if (pos_ >= text_.size()) return t;
    const char c = text_[pos_];
    const char next = pos_ + 1 < text_.size() ? text_[pos_ + 1] : '\0';
    const char after = pos_ + 2 < text_.size() ? text_[pos_ + 2] : '\0';
    if (IsNameStart(c)) return Name(t);
    if (c == '"' || c == '\'') return String(t);
    if (IsDigit(c) || (c == '.' && IsDigit(next)) ||
        ((c == '+' || c == '-') && (IsDigit(next) || (next == '.' && IsDigit(after))))) {
      return Number(t);
    }
    t.length = 1;
    switch (c) {
      case '(': t.kind = Tok::kLParen; break;
      case ')': t.kind = Tok::kRParen; break;
      case '[': t.kind = Tok::kLBracket; break;
      case ']': t.kind = Tok::kRBracket; break;
      case ',': t.kind = Tok::kComma; break;
      case '=':
        t.kind = Tok::kOp;
        t.op = CmpOp::kEq;
        if (next == '=') t.length = 2;
        break;
      case '!':
        if (next != '=') return ErrorAt(pos_, "unexpected '!' (the operator is '!=')");
        t.kind = Tok::kOp;
        t.op = CmpOp::kNe;
        t.length = 2;
        break;
      case '<':
      case '>':
        t.kind = Tok::kOp;
        t.op = c == '<' ? (next == '=' ? CmpOp::kLe : CmpOp::kLt) : (next == '=' ? CmpOp::kGe : CmpOp::kGt);
        if (next == '=') t.length = 2;
        break;
      default:
        return ErrorAt(pos_, "unexpected character " + QuoteForMessage(text_.substr(pos_, 1)) +
                                 " (expected a name, a string, a number, an operator, '(', ')', '[', ']' or ',')");
    }
    pos_ += t.length;
    return t;
  }

 private:
  StatusOr<Token> Name(Token t) {
    size_t end = pos_;
    while (end < text_.size() && IsNameChar(text_[end])) ++end;
    t.length = end - pos_;
    t.text = std::string(text_.substr(pos_, t.length));
    pos_ = end;
    const std::string lower = Lower(t.text);
    t.kind = lower == "and"     ? Tok::kAnd
             : lower == "or"    ? Tok::kOr
             : lower == "not"   ? Tok::kNot
             : lower == "in"    ? Tok::kIn
             : lower == "true"  ? Tok::kTrue
             : lower == "false" ? Tok::kFalse
                                : Tok::kName;
    return t;
  }

  StatusOr<Token> String(Token t) {
    const char quote = text_[pos_];
    size_t p = pos_ + 1;
    while (true) {
      if (p >= text_.size()) {
        return ErrorAt(t.offset, std::string("unterminated string: the ") + quote + " here is never closed");
      }
      const char c = text_[p];
      if (c == quote) break;
      if (c == '\\') {
        if (p + 1 >= text_.size()) {
          return ErrorAt(t.offset, std::string("unterminated string: the ") + quote + " here is never closed");
        }
        const char e = text_[p + 1];
        switch (e) {
          case '"': case '\'': case '\\': t.text += e; break;
          case 'n': t.text += '\n'; break;
          case 't': t.text += '\t'; break;
          default:
            return ErrorAt(p, "unknown escape " + QuoteForMessage(text_.substr(p, 2)) +
                                  " in a string (expected \\\" \\' \\\\ \\n or \\t)");
        }
        p += 2;
        continue;
      }
      t.text += c;
      ++p;
    }
    t.kind = Tok::kString;
    t.length = p + 1 - pos_;
    pos_ = p + 1;
    return t;
  }

  StatusOr<Token> Number(Token t) {
    // The run of characters that could belong to the number, checked strictly
    // afterwards, so "1.2.3" and "12abc" are one bad number, not two tokens.
    size_t end = pos_ + 1;
    while (end < text_.size()) {
      const char c = text_[end];
      const char prev = text_[end - 1];
      if (IsNameChar(c) || c == '.' || ((c == '+' || c == '-') && (prev == 'e' || prev == 'E'))) {
        ++end;
      } else {
        break;
      }
    }
    const std::string_view run = text_.substr(pos_, end - pos_);
    t.length = run.size();
    pos_ = end;
    size_t i = 0;
    if (run[i] == '+' || run[i] == '-') ++i;
    size_t digits = 0;
    while (i < run.size() && IsDigit(run[i])) ++i, ++digits;
    bool is_int = true;
    if (i < run.size() && run[i] == '.') {
      is_int = false;
      ++i;
      while (i < run.size() && IsDigit(run[i])) ++i, ++digits;
    }
    bool ok = digits > 0;
    if (ok && i < run.size() && (run[i] == 'e' || run[i] == 'E')) {
      is_int = false;
      ++i;
      if (i < run.size() && (run[i] == '+' || run[i] == '-')) ++i;
      size_t exponent_digits = 0;
      while (i < run.size() && IsDigit(run[i])) ++i, ++exponent_digits;
      ok = exponent_digits > 0;
    }
    if (!ok || i != run.size()) {
      return ErrorAt(t.offset, "bad number " + QuoteForMessage(run) +
                                   " (expected digits with an optional sign, fraction and exponent, e.g. -12.5e3)");
    }
    std::string_view digits_text = run;
    if (digits_text[0] == '+') digits_text.remove_prefix(1);  // from_chars takes no '+'
    const char* first = digits_text.data();
    const char* last = first + digits_text.size();
    t.kind = Tok::kNumber;
    t.is_int = is_int;
    if (is_int) {
      const auto r = std::from_chars(first, last, t.int_value, 10);
      if (r.ec != std::errc() || r.ptr != last) {
        return ErrorAt(t.offset, "the number " + std::string(run) +
                                     " is out of the int64 range [-9223372036854775808, 9223372036854775807]");
      }
      t.float_value = static_cast<double>(t.int_value);
    } else {
      const auto r = std::from_chars(first, last, t.float_value, std::chars_format::general);
      if (r.ec != std::errc() || r.ptr != last || !std::isfinite(t.float_value)) {
        return ErrorAt(t.offset, "the number " + std::string(run) + " is out of the range of a double");
      }
    }
    return t;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// ---- Parser ---------------------------------------------------------------

// What a name refers to.
struct Operand {
  std::string name;
  AttributeType type = AttributeType::kString;
  const AttributeColumn* column = nullptr;        // null for the built-ins
  const std::vector<std::string>* keys = nullptr; // `key`
};

class Parser {
 public:
  Parser(std::string_view text, const FilterContext& context, std::vector<Node>* nodes)
      : lexer_(text), context_(context), nodes_(nodes) {}

  /// The root node's index.
  StatusOr<int> Parse() {
    KLS_RETURN_IF_ERROR(Advance());
    if (cur_.kind == Tok::kEnd) {
      return lexer_.ErrorAt(cur_.offset, "empty expression; expected a condition such as price < 100");
    }
    KLS_ASSIGN_OR_RETURN(const int root, ParseOr(0));
    if (cur_.kind != Tok::kEnd) {
      return lexer_.ErrorAt(cur_.offset, "expected 'and', 'or' or the end of the expression, found " +
                                             lexer_.Describe(cur_));
    }
    return root;
  }

 private:
  Status Advance() {
    KLS_ASSIGN_OR_RETURN(cur_, lexer_.Next());
    return OkStatus();
  }

  int Add(Node node) {
    nodes_->push_back(std::move(node));
    return static_cast<int>(nodes_->size()) - 1;
  }

  static Node Const(bool value) {
    Node n;
    n.kind = NodeKind::kConst;
    n.value = value;
    return n;
  }

  // True exactly for the items that have a value (every item for the built-ins).
  static Node Present(const Operand& x) {
    if (x.column == nullptr) return Const(true);
    Node n;
    n.kind = NodeKind::kPresent;
    n.value = true;
    n.column = x.column;
    return n;
  }

  Status CheckDepth(int depth) const {
    if (depth > kMaxFilterDepth) {
      return lexer_.ErrorAt(cur_.offset, "nesting deeper than the limit of " + std::to_string(kMaxFilterDepth) +
                                             " levels of '(' and 'not'");
    }
    return OkStatus();
  }

  // or_expr / and_expr: n-ary nodes, so long chains cost no recursion.
  StatusOr<int> ParseOr(int depth) {
    KLS_ASSIGN_OR_RETURN(int first, ParseAnd(depth));
    if (cur_.kind != Tok::kOr) return first;
    Node n;
    n.kind = NodeKind::kOr;
    n.children.push_back(first);
    while (cur_.kind == Tok::kOr) {
      KLS_RETURN_IF_ERROR(Advance());
      KLS_ASSIGN_OR_RETURN(int child, ParseAnd(depth));
      n.children.push_back(child);
    }
    return Add(std::move(n));
  }

  StatusOr<int> ParseAnd(int depth) {
    KLS_ASSIGN_OR_RETURN(int first, ParseUnary(depth));
    if (cur_.kind != Tok::kAnd) return first;
    Node n;
    n.kind = NodeKind::kAnd;
    n.children.push_back(first);
    while (cur_.kind == Tok::kAnd) {
      KLS_RETURN_IF_ERROR(Advance());
      KLS_ASSIGN_OR_RETURN(int child, ParseUnary(depth));
      n.children.push_back(child);
    }
    return Add(std::move(n));
  }

  StatusOr<int> ParseUnary(int depth) {
    if (cur_.kind != Tok::kNot) return ParsePrimary(depth);
    KLS_RETURN_IF_ERROR(CheckDepth(depth + 1));
    KLS_RETURN_IF_ERROR(Advance());
    KLS_ASSIGN_OR_RETURN(int child, ParseUnary(depth + 1));
    Node n;
    n.kind = NodeKind::kNot;
    n.children.push_back(child);
    return Add(std::move(n));
  }

  StatusOr<int> ParsePrimary(int depth) {
    switch (cur_.kind) {
      case Tok::kLParen: {
        KLS_RETURN_IF_ERROR(CheckDepth(depth + 1));
        const size_t open = cur_.offset;
        KLS_RETURN_IF_ERROR(Advance());
        KLS_ASSIGN_OR_RETURN(int inner, ParseOr(depth + 1));
        if (cur_.kind != Tok::kRParen) {
          return lexer_.ErrorAt(cur_.offset, "expected ')' to close the '(' at column " +
                                                 std::to_string(lexer_.Column(open)) + ", found " +
                                                 lexer_.Describe(cur_));
        }
        KLS_RETURN_IF_ERROR(Advance());
        return inner;
      }
      case Tok::kTrue:
      case Tok::kFalse: {
        const bool value = cur_.kind == Tok::kTrue;
        KLS_RETURN_IF_ERROR(Advance());
        return Add(Const(value));
      }
      case Tok::kName: return ParseCondition();
      default:
        return lexer_.ErrorAt(
            cur_.offset,
            "expected a condition (an attribute name, '(', 'not', true or false), found " + lexer_.Describe(cur_));
    }
  }

  StatusOr<Operand> Resolve(const Token& name) const {
    Operand x;
    x.name = name.text;
    if (context_.attributes != nullptr) {
      if (const AttributeColumn* c = context_.attributes->Find(name.text)) {
        x.column = c;
        x.type = c->type;
        return x;
      }
    }
    const bool has_keys = context_.keys != nullptr && !context_.keys->empty();
    if (name.text == "index") {
      x.type = AttributeType::kInt;
      return x;
    }
    if (name.text == "key" && has_keys) {
      x.type = AttributeType::kString;
      x.keys = context_.keys;
      return x;
    }
    std::string known;
    if (context_.attributes != nullptr) {
      for (const AttributeColumn& c : context_.attributes->columns()) known += c.name + ", ";
    }
    known += has_keys ? "index, key" : "index";
    std::string message = "unknown attribute " + QuoteForMessage(name.text) + " (attributes: " + known + ")";
    if (name.text == "key")
      message = "unknown attribute \"key\": the data set has no item keys (attributes: " + known + ")";
    return lexer_.ErrorAt(name.offset, message);
  }

  // NAME op literal | NAME [not] in [...] | NAME (a bool alone).
  StatusOr<int> ParseCondition() {
    KLS_ASSIGN_OR_RETURN(const Operand x, Resolve(cur_));
    KLS_RETURN_IF_ERROR(Advance());
    if (cur_.kind == Tok::kOp) {
      const Token op = cur_;
      if (x.type == AttributeType::kBool && op.op != CmpOp::kEq && op.op != CmpOp::kNe) {
        return lexer_.ErrorAt(op.offset, x.name + " is a bool attribute; '" + std::string(lexer_.Text(op)) +
                                             "' is not defined for it (only = and != are)");
      }
      KLS_RETURN_IF_ERROR(Advance());
      KLS_RETURN_IF_ERROR(ExpectLiteral("after '" + std::string(lexer_.Text(op)) + "'"));
      KLS_RETURN_IF_ERROR(CheckLiteralType(x, cur_));
      const Token literal = cur_;
      KLS_RETURN_IF_ERROR(Advance());
      return Add(Comparison(x, op.op, literal));
    }
    if (cur_.kind == Tok::kIn || cur_.kind == Tok::kNot) return ParseMembership(x);
    if (x.type == AttributeType::kBool) {
      Node n;
      n.kind = NodeKind::kBool;
      n.column = x.column;
      n.value = true;
      return Add(std::move(n));
    }
    return lexer_.ErrorAt(cur_.offset, "expected a comparison operator (= == != < <= > >=) or 'in' after " + x.name +
                                           " (a " + AttributeTypeName(x.type) + " attribute), found " +
                                           lexer_.Describe(cur_));
  }

  StatusOr<int> ParseMembership(const Operand& x) {
    const bool negate = cur_.kind == Tok::kNot;
    if (negate) {
      KLS_RETURN_IF_ERROR(Advance());
      if (cur_.kind != Tok::kIn) {
        return lexer_.ErrorAt(cur_.offset, "expected 'in' after 'not' (as in " + x.name + " not in [...]), found " +
                                               lexer_.Describe(cur_));
      }
    }
    KLS_RETURN_IF_ERROR(Advance());
    if (cur_.kind != Tok::kLBracket) {
      return lexer_.ErrorAt(cur_.offset, "expected '[' to start the list after 'in', found " + lexer_.Describe(cur_));
    }
    const size_t open = cur_.offset;
    KLS_RETURN_IF_ERROR(Advance());
    std::vector<Token> literals;
    if (cur_.kind != Tok::kRBracket) {
      while (true) {
        KLS_RETURN_IF_ERROR(ExpectLiteral("in the list"));
        KLS_RETURN_IF_ERROR(CheckLiteralType(x, cur_));
        if (literals.size() >= kMaxFilterListLiterals) {
          return lexer_.ErrorAt(cur_.offset, "the list holds more than the limit of " +
                                                 std::to_string(kMaxFilterListLiterals) + " values");
        }
        literals.push_back(std::move(cur_));
        KLS_RETURN_IF_ERROR(Advance());
        if (cur_.kind == Tok::kRBracket) break;
        if (cur_.kind != Tok::kComma) {
          return lexer_.ErrorAt(cur_.offset, "expected ',' or ']' in the list opened at column " +
                                                 std::to_string(lexer_.Column(open)) + ", found " +
                                                 lexer_.Describe(cur_));
        }
        KLS_RETURN_IF_ERROR(Advance());
      }
    }
    KLS_RETURN_IF_ERROR(Advance());  // ']'
    return Add(Membership(x, negate, literals));
  }

  Status ExpectLiteral(const std::string& where) const {
    switch (cur_.kind) {
      case Tok::kString:
      case Tok::kNumber:
      case Tok::kTrue:
      case Tok::kFalse: return OkStatus();
      default:
        return lexer_.ErrorAt(cur_.offset, "expected a value (a string, a number, true or false) " + where +
                                               ", found " + lexer_.Describe(cur_));
    }
  }

  Status CheckLiteralType(const Operand& x, const Token& literal) const {
    bool ok = false;
    std::string hint;
    switch (x.type) {
      case AttributeType::kString:
        ok = literal.kind == Tok::kString;
        if (literal.kind == Tok::kNumber) hint = " (quote it: \"" + std::string(lexer_.Text(literal)) + "\")";
        break;
      case AttributeType::kInt:
      case AttributeType::kFloat: ok = literal.kind == Tok::kNumber; break;
      case AttributeType::kBool:
        ok = literal.kind == Tok::kTrue || literal.kind == Tok::kFalse;
        hint = " (use true or false)";
        break;
    }
    if (ok) return OkStatus();
    std::string what;
    switch (literal.kind) {
      case Tok::kString: what = "the string " + QuoteForMessage(literal.text); break;
      case Tok::kNumber: what = "the number " + std::string(lexer_.Text(literal)); break;
      default: what = literal.kind == Tok::kTrue ? "true" : "false"; break;
    }
    return lexer_.ErrorAt(literal.offset, x.name + " is " + (x.type == AttributeType::kInt ? "an " : "a ") +
                                              AttributeTypeName(x.type) + " attribute; it cannot be compared with " +
                                              what + hint);
  }

  // x op d for an int operand and a double literal, rewritten exactly as an
  // int comparison (x < d ⇔ x < ceil(d), x <= d ⇔ x <= floor(d), …) or as a
  // constant over the items that have a value.
  static Node IntVersusDouble(const Operand& x, CmpOp op, double d) {
    Node n;
    n.kind = NodeKind::kIntCmp;
    n.column = x.column;
    n.op = op;
    const double lo = std::floor(d), hi = std::ceil(d);
    const auto as_int = [](double v) { return static_cast<int64_t>(v); };
    switch (op) {
      case CmpOp::kEq:
      case CmpOp::kNe:
        if (lo != d || d < -kTwo63 || d >= kTwo63) {
          return op == CmpOp::kEq ? Const(false) : Present(x);  // no int64 equals d
        }
        n.int_value = as_int(d);
        return n;
      case CmpOp::kLt:  // x < ceil(d)
        if (hi >= kTwo63) return Present(x);
        if (hi <= -kTwo63) return Const(false);
        n.int_value = as_int(hi);
        return n;
      case CmpOp::kGe:  // x >= ceil(d)
        if (hi >= kTwo63) return Const(false);
        if (hi <= -kTwo63) return Present(x);
        n.int_value = as_int(hi);
        return n;
      case CmpOp::kLe:  // x <= floor(d)
        if (lo >= kTwo63) return Present(x);
        if (lo < -kTwo63) return Const(false);
        n.int_value = as_int(lo);
        return n;
      case CmpOp::kGt:  // x > floor(d)
        if (lo >= kTwo63) return Const(false);
        if (lo < -kTwo63) return Present(x);
        n.int_value = as_int(lo);
        return n;
    }
    return n;
  }

  // Whether int64 v is exactly a double (then float comparisons with it are exact).
  static bool IsExactDouble(int64_t v) {
    const double d = static_cast<double>(v);
    return d < kTwo63 && static_cast<int64_t>(d) == v;
  }

  static Node Comparison(const Operand& x, CmpOp op, const Token& literal) {
    Node n;
    n.column = x.column;
    n.op = op;
    switch (x.type) {
      case AttributeType::kBool:
        n.kind = NodeKind::kBool;
        n.value = (literal.kind == Tok::kTrue) == (op == CmpOp::kEq);
        return n;
      case AttributeType::kString:
        n.kind = NodeKind::kStringCmp;
        n.keys = x.keys;
        n.string_value = literal.text;
        return n;
      case AttributeType::kInt:
        if (!literal.is_int) return IntVersusDouble(x, op, literal.float_value);
        n.kind = NodeKind::kIntCmp;
        n.int_value = literal.int_value;
        return n;
      case AttributeType::kFloat:
        if (!literal.is_int || IsExactDouble(literal.int_value)) {
          n.kind = NodeKind::kFloatCmp;
          n.float_value = literal.is_int ? static_cast<double>(literal.int_value) : literal.float_value;
        } else {
          n.kind = NodeKind::kFloatIntCmp;
          n.int_value = literal.int_value;
        }
        return n;
    }
    return n;
  }

  // Only literals that some value of x's type can equal are kept.
  static Node Membership(const Operand& x, bool negate, const std::vector<Token>& literals) {
    Node n;
    n.column = x.column;
    n.value = negate;
    switch (x.type) {
      case AttributeType::kBool: {
        bool has_true = false, has_false = false;
        for (const Token& t : literals) (t.kind == Tok::kTrue ? has_true : has_false) = true;
        if (negate) has_true = !has_true, has_false = !has_false;
        if (has_true && has_false) return Present(x);
        if (!has_true && !has_false) return Const(false);
        n.kind = NodeKind::kBool;
        n.value = has_true;
        return n;
      }
      case AttributeType::kString:
        n.kind = NodeKind::kStringIn;
        n.keys = x.keys;
        for (const Token& t : literals) n.string_list.push_back(t.text);
        std::sort(n.string_list.begin(), n.string_list.end());
        n.string_list.erase(std::unique(n.string_list.begin(), n.string_list.end()), n.string_list.end());
        break;
      case AttributeType::kInt:
        n.kind = NodeKind::kIntIn;
        for (const Token& t : literals) {
          if (t.is_int) {
            n.int_list.push_back(t.int_value);
          } else if (std::floor(t.float_value) == t.float_value && t.float_value >= -kTwo63 &&
                     t.float_value < kTwo63) {
            n.int_list.push_back(static_cast<int64_t>(t.float_value));
          }
        }
        std::sort(n.int_list.begin(), n.int_list.end());
        n.int_list.erase(std::unique(n.int_list.begin(), n.int_list.end()), n.int_list.end());
        break;
      case AttributeType::kFloat:
        n.kind = NodeKind::kFloatIn;
        for (const Token& t : literals) {
          if (!t.is_int) {
            n.float_list.push_back(t.float_value);
          } else if (IsExactDouble(t.int_value)) {
            n.float_list.push_back(static_cast<double>(t.int_value));
          }
        }
        std::sort(n.float_list.begin(), n.float_list.end());
        break;
    }
    return n;
  }

  Lexer lexer_;
  const FilterContext& context_;
  std::vector<Node>* nodes_;
  Token cur_;
};

// ---- Evaluation -----------------------------------------------------------

using Words = std::vector<uint64_t>;

// words[w] bit b = pred(64 w + b) for the n items; bits past n stay clear.
template <typename Pred>
void Fill(int64_t n, Words* words, Pred pred) {
  for (size_t w = 0; w < words->size(); ++w) {
    const int64_t base = static_cast<int64_t>(w) * 64;
    const int limit = static_cast<int>(std::min<int64_t>(64, n - base));
    uint64_t bits = 0;
    for (int b = 0; b < limit; ++b) bits |= static_cast<uint64_t>(pred(base + b)) << b;
    (*words)[w] = bits;
  }
}

// Fill with `present && Compare(op, value(i), v)`, the operator chosen
// outside the loop so that each loop body is a single comparison.
template <typename Value, typename Rhs>
void FillCompare(int64_t n, Words* words, const uint8_t* present, CmpOp op, Value value, const Rhs& v) {
  auto run = [&](auto cmp) {
    if (present == nullptr) {
      Fill(n, words, [&](int64_t i) { return cmp(value(i), v); });
    } else {
      Fill(n, words, [&](int64_t i) { return present[i] != 0 && cmp(value(i), v); });
    }
  };
  switch (op) {
    case CmpOp::kEq: run([](const auto& a, const auto& b) { return a == b; }); break;
    case CmpOp::kNe: run([](const auto& a, const auto& b) { return a != b; }); break;
    case CmpOp::kLt: run([](const auto& a, const auto& b) { return a < b; }); break;
    case CmpOp::kLe: run([](const auto& a, const auto& b) { return a <= b; }); break;
    case CmpOp::kGt: run([](const auto& a, const auto& b) { return a > b; }); break;
    case CmpOp::kGe: run([](const auto& a, const auto& b) { return a >= b; }); break;
  }
}

// Exact three-way comparison of a double with an int64 (no rounding of either).
int CompareDoubleInt(double x, int64_t v) {
  if (x >= kTwo63) return 1;
  if (x < -kTwo63) return -1;
  const double f = std::floor(x);
  const int64_t fi = static_cast<int64_t>(f);
  if (fi != v) return fi < v ? -1 : 1;
  return x > f ? 1 : 0;
}

void Eval(const std::vector<Node>& nodes, int index, int64_t n, Words* out) {
  const Node& node = nodes[static_cast<size_t>(index)];
  const uint8_t* present = node.column != nullptr ? node.column->present.data() : nullptr;
  switch (node.kind) {
    case NodeKind::kConst:
      Fill(n, out, [&](int64_t) { return node.value; });
      return;
    case NodeKind::kPresent:
      Fill(n, out, [&](int64_t i) { return (present[i] != 0) == node.value; });
      return;
    case NodeKind::kAnd:
    case NodeKind::kOr: {
      const bool is_and = node.kind == NodeKind::kAnd;
      Eval(nodes, node.children[0], n, out);
      Words child(out->size());
      for (size_t c = 1; c < node.children.size(); ++c) {
        Eval(nodes, node.children[c], n, &child);
        for (size_t w = 0; w < out->size(); ++w) (*out)[w] = is_and ? (*out)[w] & child[w] : (*out)[w] | child[w];
      }
      return;
    }
    case NodeKind::kNot: {
      Eval(nodes, node.children[0], n, out);
      for (uint64_t& w : *out) w = ~w;
      if (n % 64 != 0 && !out->empty()) out->back() &= (uint64_t{1} << (n % 64)) - 1;
      return;
    }
    case NodeKind::kBool: {
      const uint8_t* v = node.column->bools.data();
      const uint8_t want = node.value ? 1 : 0;
      Fill(n, out, [&](int64_t i) { return present[i] != 0 && v[i] == want; });
      return;
    }
    case NodeKind::kIntCmp:
      if (node.column == nullptr) {
        FillCompare(n, out, nullptr, node.op, [](int64_t i) { return i; }, node.int_value);
      } else {
        const int64_t* v = node.column->ints.data();
        FillCompare(n, out, present, node.op, [v](int64_t i) { return v[i]; }, node.int_value);
      }
      return;
    case NodeKind::kFloatCmp: {
      const double* v = node.column->floats.data();
      FillCompare(n, out, present, node.op, [v](int64_t i) { return v[i]; }, node.float_value);
      return;
    }
    case NodeKind::kFloatIntCmp: {
      const double* v = node.column->floats.data();
      FillCompare(n, out, present, node.op, [v, &node](int64_t i) { return CompareDoubleInt(v[i], node.int_value); },
                  0);
      return;
    }
    case NodeKind::kStringCmp: {
      const std::string* v = node.column != nullptr ? node.column->strings.data() : node.keys->data();
      const std::string_view s = node.string_value;
      FillCompare(n, out, present, node.op, [v](int64_t i) { return std::string_view(v[i]); }, s);
      return;
    }
    case NodeKind::kIntIn: {
      const auto& list = node.int_list;
      const int64_t* v = node.column != nullptr ? node.column->ints.data() : nullptr;
      Fill(n, out, [&](int64_t i) {
        if (present != nullptr && present[i] == 0) return false;
        return std::binary_search(list.begin(), list.end(), v != nullptr ? v[i] : i) != node.value;
      });
      return;
    }
    case NodeKind::kFloatIn: {
      const auto& list = node.float_list;
      const double* v = node.column->floats.data();
      Fill(n, out, [&](int64_t i) {
        return present[i] != 0 && std::binary_search(list.begin(), list.end(), v[i]) != node.value;
      });
      return;
    }
    case NodeKind::kStringIn: {
      const auto& list = node.string_list;
      const std::string* v = node.column != nullptr ? node.column->strings.data() : node.keys->data();
      if (list.size() <= 8) {
        // Short lists (the usual case) are scanned: most values differ in
        // length or first byte from every entry, cheaper than a search.
        Fill(n, out, [&](int64_t i) {
          if (present != nullptr && present[i] == 0) return false;
          bool found = false;
          for (const std::string& s : list) found |= v[i] == s;
          return found != node.value;
        });
        return;
      }
      Fill(n, out, [&](int64_t i) {
        if (present != nullptr && present[i] == 0) return false;
        return std::binary_search(list.begin(), list.end(), v[i]) != node.value;
      });
      return;
    }
  }
}

Status CheckContext(const FilterContext& context) {
  if (context.num_items < 0 || context.num_items > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("filter: the data set has " + std::to_string(context.num_items) +
                                " items; expected 0 to 2147483647");
  }
  if (context.attributes != nullptr && context.attributes->num_items() != context.num_items) {
    return InvalidArgumentError("filter: the item attributes cover " +
                                std::to_string(context.attributes->num_items()) + " items, the data set has " +
                                std::to_string(context.num_items));
  }
  if (context.keys != nullptr && !context.keys->empty() &&
      static_cast<int64_t>(context.keys->size()) != context.num_items) {
    return InvalidArgumentError("filter: the data set has " + std::to_string(context.keys->size()) + " keys for " +
                                std::to_string(context.num_items) + " items");
  }
  return OkStatus();
}

}  // namespace

StatusOr<ItemFilter> ItemFilter::Compile(std::string_view expression, const FilterContext& context) {
  return GuardExceptions("filter", [&]() -> StatusOr<ItemFilter> {
    KLS_RETURN_IF_ERROR(CheckContext(context));
    if (expression.size() > kMaxFilterExpressionBytes) {
      const Lexer lexer(expression);
      return lexer.ErrorAt(kMaxFilterExpressionBytes, "the expression is " + std::to_string(expression.size()) +
                                                          " bytes long; the limit is " +
                                                          std::to_string(kMaxFilterExpressionBytes));
    }
    ItemFilter filter;
    Parser parser(expression, context, &filter.nodes_);
    KLS_ASSIGN_OR_RETURN(const int root, parser.Parse());
    // Nodes are added after their children, so the root is the last one,
    // where Evaluate starts.
    if (root != static_cast<int>(filter.nodes_.size()) - 1) return InternalError("filter: root is not the last node");
    filter.expression_ = std::string(expression);
    filter.num_items_ = context.num_items;
    return filter;
  });
}

ItemBitmap ItemFilter::Evaluate() const {
  const int64_t n = num_items_;
  if (n == 0 || nodes_.empty()) return ItemBitmap(n);
  Words words(static_cast<size_t>((n + 63) / 64));
  Eval(nodes_, static_cast<int>(nodes_.size()) - 1, n, &words);
  // ItemBitmap takes bits one at a time: touch the fewer of the set and clear ones.
  int64_t count = 0;
  for (uint64_t w : words) count += __builtin_popcountll(w);
  const bool mostly_set = 2 * count > n;
  ItemBitmap out(n, mostly_set);
  for (size_t t = 0; t < words.size(); ++t) {
    uint64_t w = mostly_set ? ~words[t] : words[t];
    if (mostly_set && t + 1 == words.size() && n % 64 != 0) w &= (uint64_t{1} << (n % 64)) - 1;
    while (w != 0) {
      const int64_t i = static_cast<int64_t>(t) * 64 + __builtin_ctzll(w);
      if (mostly_set) {
        out.Clear(i);
      } else {
        out.Set(i);
      }
      w &= w - 1;
    }
  }
  return out;
}

}  // namespace kls
