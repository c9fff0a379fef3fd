// ItemAttributes: Make's validation, the binary encoding (round trip; every
// truncation and every flipped bit is DATA_LOSS, never a crash), and the
// attributes CSV (keys and rows, type inference, explicit types, RFC-4180
// quoting, missing cells, and errors that name the line).
#include "core/model/item_attributes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace kls {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

AttributeColumn StringColumn(std::string name, std::vector<std::string> v, std::vector<uint8_t> present = {}) {
  AttributeColumn c;
  c.name = std::move(name);
  c.type = AttributeType::kString;
  c.present = present.empty() ? std::vector<uint8_t>(v.size(), 1) : present;
  c.strings = std::move(v);
  return c;
}
AttributeColumn IntColumn(std::string name, std::vector<int64_t> v) {
  AttributeColumn c;
  c.name = std::move(name);
  c.type = AttributeType::kInt;
  c.present.assign(v.size(), 1);
  c.ints = std::move(v);
  return c;
}
AttributeColumn FloatColumn(std::string name, std::vector<double> v) {
  AttributeColumn c;
  c.name = std::move(name);
  c.type = AttributeType::kFloat;
  c.present.assign(v.size(), 1);
  c.floats = std::move(v);
  return c;
}
AttributeColumn BoolColumn(std::string name, std::vector<uint8_t> v) {
  AttributeColumn c;
  c.name = std::move(name);
  c.type = AttributeType::kBool;
  c.present.assign(v.size(), 1);
  c.bools = std::move(v);
  return c;
}

// A random table of n items: one column of each type and a second string
// column whose values need CSV quoting; about `missing` of the values absent
// (stored as the parser stores them: "", 0, 0.0, false).
ItemAttributes RandomTable(std::mt19937_64& rng, int64_t n, double missing) {
  std::uniform_real_distribution<double> u(0, 1);
  const std::vector<std::string> words = {"shoes", "bags", "a, b", "say \"hi\"", "two\nlines", "ünïcode", "x"};
  std::vector<AttributeColumn> cols = {StringColumn("category", {}), IntColumn("count", {}),
                                       FloatColumn("price", {}), BoolColumn("discontinued", {}),
                                       StringColumn("note", {})};
  for (int64_t i = 0; i < n; ++i) {
    for (AttributeColumn& c : cols) {
      const bool has = u(rng) >= missing;
      c.present.push_back(has ? 1 : 0);
      switch (c.type) {
        case AttributeType::kString:
          c.strings.push_back(has ? words[rng() % words.size()] + (c.name == "note" ? std::to_string(i) : "") : "");
          break;
        case AttributeType::kInt: {
          const int64_t extremes[] = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0,
                                      -1, (int64_t{1} << 53) + 1};
          c.ints.push_back(!has ? 0 : rng() % 4 == 0 ? extremes[rng() % 5] : static_cast<int64_t>(rng() % 2001) - 1000);
          break;
        }
        case AttributeType::kFloat:
          c.floats.push_back(has ? std::ldexp(u(rng) - 0.5, static_cast<int>(rng() % 200) - 100) : 0.0);
          break;
        case AttributeType::kBool: c.bools.push_back(has ? rng() % 2 : 0); break;
      }
    }
  }
  auto made = ItemAttributes::Make(n, std::move(cols));
  EXPECT_TRUE(made.ok()) << made.status();
  return std::move(made).value();
}

// ---- Make -----------------------------------------------------------------

TEST(ItemAttributesTest, MakeAcceptsValidColumnsAndDescribesThem) {
  auto a = ItemAttributes::Make(3, {StringColumn("category", {"a", "b", ""}, {1, 1, 0}),
                                    FloatColumn("price", {1.5, 2, 3}), BoolColumn("discontinued", {0, 1, 0})});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->num_items(), 3);
  EXPECT_EQ(a->Summary(), "category:string, price:float, discontinued:bool");
  ASSERT_NE(a->Find("price"), nullptr);
  EXPECT_EQ(a->Find("price")->floats[1], 2.0);
  EXPECT_EQ(a->Find("Price"), nullptr);
  EXPECT_EQ(a->Find("nothing"), nullptr);
  EXPECT_EQ(ItemAttributes().Summary(), "");
  EXPECT_EQ(ItemAttributes().num_items(), 0);
  EXPECT_STREQ(AttributeTypeName(AttributeType::kString), "string");
  EXPECT_STREQ(AttributeTypeName(AttributeType::kInt), "int");
  EXPECT_STREQ(AttributeTypeName(AttributeType::kFloat), "float");
  EXPECT_STREQ(AttributeTypeName(AttributeType::kBool), "bool");
}

TEST(ItemAttributesTest, MakeRejectsInvalidColumnsNamingThem) {
  const auto error = [](int64_t n, std::vector<AttributeColumn> cols) {
    auto a = ItemAttributes::Make(n, std::move(cols));
    EXPECT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    return a.status().message();
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> prices(20, 1.0);
  prices[17] = inf;
  EXPECT_EQ(error(20, {IntColumn("a", std::vector<int64_t>(20)), FloatColumn("b", std::vector<double>(20)),
                       StringColumn("c", std::vector<std::string>(20)), FloatColumn("price", prices)}),
            "attribute column 3 \"price\": value 17 is not finite");
  EXPECT_EQ(error(2, {FloatColumn("price", {1, std::nan("")})}), "attribute column 0 \"price\": value 1 is not finite");
  EXPECT_EQ(error(3, {IntColumn("count", {1, 2})}), "attribute column 0 \"count\": 2 int values for 3 items");
  AttributeColumn extra = IntColumn("count", {1, 2});
  extra.floats = {1.0};
  EXPECT_THAT(error(2, {extra}), HasSubstr("an int column has 1 float values (expected none)"));
  AttributeColumn short_present = IntColumn("count", {1, 2});
  short_present.present = {1};
  EXPECT_EQ(error(2, {short_present}), "attribute column 0 \"count\": 1 presence flags for 2 items");
  AttributeColumn bad_flag = IntColumn("count", {1, 2});
  bad_flag.present[1] = 2;
  EXPECT_THAT(error(2, {bad_flag}), HasSubstr("presence flag 1 is 2"));
  EXPECT_THAT(error(2, {BoolColumn("flag", {0, 7})}), HasSubstr("\"flag\": value 1 is 7 (expected 0 or 1)"));
  for (const char* name : {"", "1abc", "has space", "in", "AND", "Not", "true", "FALSE", "index", "key", "Key",
                           "a-b", "ü"}) {
    EXPECT_THAT(error(1, {IntColumn(name, {1})}), HasSubstr("not a valid attribute name")) << name;
  }
  EXPECT_THAT(error(1, {IntColumn(std::string(65, 'a'), {1})}), HasSubstr("not a valid attribute name"));
  EXPECT_TRUE(ItemAttributes::Make(1, {IntColumn(std::string(64, 'a'), {1})}).ok());
  EXPECT_TRUE(ItemAttributes::Make(1, {IntColumn("_index2", {1}), IntColumn("keys", {1}), IntColumn("IN_", {1})}).ok());
  EXPECT_EQ(error(1, {IntColumn("a", {1}), IntColumn("b", {1}), IntColumn("a", {2})}),
            "attribute column 2 \"a\": the name is also used by column 0");
  std::vector<AttributeColumn> many;
  for (int c = 0; c < 257; ++c) many.push_back(BoolColumn("c" + std::to_string(c), {1}));
  EXPECT_THAT(error(1, many), HasSubstr("257 columns; at most 256"));
  many.pop_back();
  EXPECT_TRUE(ItemAttributes::Make(1, std::move(many)).ok());
  EXPECT_THAT(error(-1, {}), HasSubstr("num_items = -1"));
}

// ---- Serialize / Deserialize -----------------------------------------------

TEST(ItemAttributesTest, SerializeRoundTripsRandomTables) {
  std::mt19937_64 rng(20240611);
  for (int64_t n : {0, 1, 7, 64, 65, 1000}) {
    const ItemAttributes a = RandomTable(rng, n, 0.2);
    auto back = ItemAttributes::Deserialize(a.Serialize());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == a) << "n = " << n;
    EXPECT_EQ(back->Summary(), a.Summary());
  }
  auto empty = ItemAttributes::Deserialize(ItemAttributes().Serialize());
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(*empty == ItemAttributes());
  auto no_columns = ItemAttributes::Make(5000, {});
  ASSERT_TRUE(no_columns.ok());
  auto back = ItemAttributes::Deserialize(no_columns->Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->num_items(), 5000);
}

TEST(ItemAttributesTest, DeserializeOfEveryTruncationIsDataLoss) {
  std::mt19937_64 rng(7);
  const std::string bytes = RandomTable(rng, 12, 0.3).Serialize();
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto a = ItemAttributes::Deserialize(std::string_view(bytes).substr(0, len));
    ASSERT_FALSE(a.ok()) << "length " << len;
    EXPECT_EQ(a.status().code(), StatusCode::kDataLoss) << a.status();
  }
  auto extended = ItemAttributes::Deserialize(bytes + "x");
  ASSERT_FALSE(extended.ok());
  EXPECT_EQ(extended.status().code(), StatusCode::kDataLoss);
}

TEST(ItemAttributesTest, DeserializeOfEveryFlippedBitIsDataLoss) {
  std::mt19937_64 rng(8);
  const std::string bytes = RandomTable(rng, 9, 0.3).Serialize();
  for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    std::string damaged = bytes;
    damaged[bit / 8] = static_cast<char>(damaged[bit / 8] ^ (1 << (bit % 8)));
    auto a = ItemAttributes::Deserialize(damaged);
    ASSERT_FALSE(a.ok()) << "bit " << bit;
    EXPECT_EQ(a.status().code(), StatusCode::kDataLoss) << a.status();
  }
}

TEST(ItemAttributesTest, DeserializeOfForeignBytesIsDataLoss) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string junk(rng() % 200, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (trial % 2 == 0 && junk.size() >= 8) std::memcpy(&junk[0], "KLSA\x01\0\0\0", 8);  // a plausible header
    auto a = ItemAttributes::Deserialize(junk);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kDataLoss);
  }
  std::string other_version = ItemAttributes().Serialize();
  other_version[4] = 2;
  auto a = ItemAttributes::Deserialize(other_version);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("format version 2 is not supported"));
}

// Bytes with a correct checksum whose counts lie: DATA_LOSS, without
// allocating what the counts claim.
TEST(ItemAttributesTest, DeserializeOfLyingCountsIsDataLoss) {
  const auto seal = [](std::string body) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64, as the encoding's trailer
    for (unsigned char b : body) h = (h ^ b) * 0x100000001b3ull;
    body.append(reinterpret_cast<const char*>(&h), 8);
    return body;
  };
  const auto put = [](std::string* s, auto v) { s->append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  std::string body = "KLSA";
  put(&body, uint32_t{1});
  put(&body, int64_t{2147483647});  // items
  put(&body, uint32_t{1});          // columns
  put(&body, uint64_t{1});
  body += "s";
  put(&body, uint8_t{0});                   // string column
  put(&body, uint64_t{1} << 62);            // presence blob "length"
  auto a = ItemAttributes::Deserialize(seal(body));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kDataLoss) << a.status();

  std::string too_many = "KLSA";
  put(&too_many, uint32_t{1});
  put(&too_many, int64_t{1});
  put(&too_many, uint32_t{100000});
  a = ItemAttributes::Deserialize(seal(too_many));
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("100000 columns"));

  // A well-formed encoding of contents Make rejects (a NaN price).
  std::string nan_body = "KLSA";
  put(&nan_body, uint32_t{1});
  put(&nan_body, int64_t{1});
  put(&nan_body, uint32_t{1});
  put(&nan_body, uint64_t{5});
  nan_body += "price";
  put(&nan_body, uint8_t{2});
  put(&nan_body, uint64_t{1});
  nan_body += '\1';
  put(&nan_body, uint64_t{8});
  put(&nan_body, std::nan(""));
  a = ItemAttributes::Deserialize(seal(nan_body));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(a.status().message(), HasSubstr("\"price\": value 0 is not finite"));
}

TEST(ItemAttributesTest, MemoryBytesGrowsWithTheData) {
  std::mt19937_64 rng(10);
  const int64_t small = RandomTable(rng, 10, 0).memory_bytes();
  const int64_t large = RandomTable(rng, 10000, 0).memory_bytes();
  EXPECT_GT(small, 0);
  // Per item at least the int, the float, two flags of each column and two string objects.
  EXPECT_GT(large - small, 9990 * (8 + 8 + 5 + 1 + 2 * 32));
}

// ---- ParseAttributesCsv ----------------------------------------------------

std::unordered_map<std::string, int> KeyIndex(const std::vector<std::string>& keys) {
  std::unordered_map<std::string, int> index;
  for (size_t i = 0; i < keys.size(); ++i) index[keys[i]] = static_cast<int>(i);
  return index;
}

Status CsvError(const std::string& text, int64_t n = 4, const std::unordered_map<std::string, int>* keys = nullptr) {
  auto a = ParseAttributesCsv(text, n, keys, "attrs.csv");
  EXPECT_FALSE(a.ok()) << text;
  return a.ok() ? OkStatus() : a.status();
}

TEST(ItemAttributesCsvTest, KeysInferredTypesAndMissingValues) {
  const auto keys = KeyIndex({"k0", "k1", "k2", "k3", "k4"});
  const std::string text =
      "key,category,price,discontinued,count,code\n"
      "k2,shoes,99.5,TRUE,3,007\n"
      "k0,\"a, b\",100,false,-4,x\n"
      "\n"
      "k4,,1e3,False,,12\r\n";
  auto a = ParseAttributesCsv(text, 5, &keys, "attrs.csv");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Summary(), "category:string, price:float, discontinued:bool, count:int, code:string");
  const AttributeColumn& category = *a->Find("category");
  EXPECT_EQ(category.present, (std::vector<uint8_t>{1, 0, 1, 0, 0}));
  EXPECT_EQ(category.strings[0], "a, b");
  EXPECT_EQ(category.strings[2], "shoes");
  const AttributeColumn& price = *a->Find("price");
  EXPECT_EQ(price.present, (std::vector<uint8_t>{1, 0, 1, 0, 1}));
  EXPECT_EQ(price.floats, (std::vector<double>{100, 0, 99.5, 0, 1000}));
  const AttributeColumn& discontinued = *a->Find("discontinued");
  EXPECT_EQ(discontinued.bools, (std::vector<uint8_t>{0, 0, 1, 0, 0}));
  EXPECT_EQ(discontinued.present, (std::vector<uint8_t>{1, 0, 1, 0, 1}));
  const AttributeColumn& count = *a->Find("count");
  EXPECT_EQ(count.ints, (std::vector<int64_t>{-4, 0, 3, 0, 0}));
  EXPECT_EQ(count.present, (std::vector<uint8_t>{1, 0, 1, 0, 0}));
  EXPECT_EQ(a->Find("code")->strings[2], "007");
  EXPECT_EQ(a->Find("code")->strings[4], "12");
}

TEST(ItemAttributesCsvTest, RowsAndInferenceEdgeCases) {
  const std::string text =
      "row,big,small,mixed,empty,yes\n"
      "0,9223372036854775807,-9223372036854775808,1,,true\n"
      "1,9223372036854775808,+5,2.5,,tRuE\n"
      "3,1,0x10,nan,,false\n";
  auto a = ParseAttributesCsv(text, 4, nullptr, "attrs.csv");
  ASSERT_TRUE(a.ok()) << a.status();
  // 2^63 is no int64, so "big" is a float column; "0x10" is no int64, so "small" is a string column.
  EXPECT_EQ(a->Summary(), "big:float, small:string, mixed:string, empty:string, yes:bool");
  auto ints = ParseAttributesCsv("row,v\n0,9223372036854775807\n2,-9223372036854775808\n1,+5\n", 3, nullptr, "a.csv");
  ASSERT_TRUE(ints.ok()) << ints.status();
  EXPECT_EQ(ints->columns()[0].type, AttributeType::kInt);
  EXPECT_EQ(ints->columns()[0].ints,
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(), 5, std::numeric_limits<int64_t>::min()}));
  auto floats = ParseAttributesCsv("row,v\n0,1\n1,2.5\n2,-3e-2\n", 3, nullptr, "a.csv");
  ASSERT_TRUE(floats.ok());
  EXPECT_EQ(floats->columns()[0].type, AttributeType::kFloat);
  EXPECT_EQ(floats->columns()[0].floats, (std::vector<double>{1, 2.5, -0.03}));
  // "inf" parses as a double but is not finite: a string column.
  auto inf = ParseAttributesCsv("row,v\n0,1\n1,inf\n", 3, nullptr, "a.csv");
  ASSERT_TRUE(inf.ok());
  EXPECT_EQ(inf->columns()[0].type, AttributeType::kString);
  // A spreadsheet's byte order mark before the header.
  auto bom = ParseAttributesCsv("\xEF\xBB\xBFrow,v\n1,x\n", 2, nullptr, "a.csv");
  ASSERT_TRUE(bom.ok()) << bom.status();
  EXPECT_EQ(bom->Find("v")->present, (std::vector<uint8_t>{0, 1}));
  // A header alone: no items listed, nothing present.
  auto header_only = ParseAttributesCsv("row,v:int\n", 3, nullptr, "a.csv");
  ASSERT_TRUE(header_only.ok()) << header_only.status();
  EXPECT_EQ(header_only->columns()[0].present, (std::vector<uint8_t>{0, 0, 0}));
}

TEST(ItemAttributesCsvTest, ExplicitTypes) {
  auto a = ParseAttributesCsv("row, price:float , code:string,flag:BOOL,n:int\n0,1,007,true,5\n1,2.5,x,false,\n", 2,
                              nullptr, "a.csv");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Summary(), "price:float, code:string, flag:bool, n:int");
  EXPECT_EQ(a->Find("price")->floats, (std::vector<double>{1, 2.5}));
  EXPECT_EQ(a->Find("code")->strings, (std::vector<std::string>{"007", "x"}));
  EXPECT_EQ(a->Find("n")->present, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(CsvError("row,n:int\n0,1\n\n1,1.5\n").message(), "attrs.csv line 4: column \"n\": \"1.5\" is not an int");
  EXPECT_EQ(CsvError("row,flag:bool\n0,yes\n").message(), "attrs.csv line 2: column \"flag\": \"yes\" is not a bool");
  EXPECT_EQ(CsvError("row,a,b,c,price:float\n0,,,,1\n1,,,,2\n2,,,,3\n3,,,,4\n\n\n1,,,,abc\n", 5).message(),
            "attrs.csv line 8: item 1 (\"1\") is listed twice (first on line 3)");
  EXPECT_EQ(CsvError("row,a,b,c,price:float\n0,,,,1\n1,,,,2\n2,,,,3\n3,,,,4\n\n4,,,,abc\n", 5).message(),
            "attrs.csv line 7: column \"price\": \"abc\" is not a float");
  EXPECT_EQ(CsvError("row,price:float\n0,inf\n").message(),
            "attrs.csv line 2: column \"price\": \"inf\" is not a float");
  EXPECT_EQ(CsvError("row,price:double\n").message(),
            "attrs.csv line 1: column \"price\": unknown type \"double\" (expected string, int, float or bool)");
}

TEST(ItemAttributesCsvTest, QuotingFollowsRfc4180) {
  const std::string text =
      "row,\"text\",n\r\n"
      "0,\"a, b\",1\r\n"
      "1,\"say \"\"hi\"\"\",2\r\n"
      "2,\"two\nlines\",3\r\n"
      "3, \"  padded  \" ,4\r\n";
  auto a = ParseAttributesCsv(text, 5, nullptr, "a.csv");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Find("text")->strings, (std::vector<std::string>{"a, b", "say \"hi\"", "two\nlines", "  padded  ", ""}));
  EXPECT_EQ(a->Find("n")->ints, (std::vector<int64_t>{1, 2, 3, 4, 0}));
  // Line numbers count the line break inside the quoted cell.
  EXPECT_EQ(CsvError("row,text,n\n0,\"two\nlines\",1\n1,x,y,z\n").message(),
            "attrs.csv line 4: 4 cells, expected 3 as in the header");
  EXPECT_THAT(CsvError("row,text\n0,\"open\n1,x\n").message(),
              StartsWith("attrs.csv line 2: unterminated quoted cell"));
  EXPECT_THAT(CsvError("row,text\n0,ab\"c\n").message(),
              StartsWith("attrs.csv line 2: a quote inside an unquoted cell"));
  EXPECT_THAT(CsvError("row,text\n0,\"ab\"c\n").message(),
              StartsWith("attrs.csv line 2: unexpected \"c\" after a closing quote"));
}

TEST(ItemAttributesCsvTest, ErrorsNameTheLine) {
  const auto keys = KeyIndex({"a", "b", "c"});
  EXPECT_EQ(CsvError("key,x\na,1\nzz,2\n", 3, &keys).message(), "attrs.csv line 3: unknown item key \"zz\"");
  EXPECT_EQ(CsvError("key,x\na,1\nb,2\na,3\n", 3, &keys).message(),
            "attrs.csv line 4: item 0 (\"a\") is listed twice (first on line 2)");
  const Status no_keys = CsvError("key,x\na,1\n", 3, nullptr);
  EXPECT_EQ(no_keys.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_keys.message(), HasSubstr("the data set has no item keys"));
  EXPECT_EQ(CsvError("row,x\n4,1\n").message(), "attrs.csv line 2: row \"4\" is not an item index in [0, 4)");
  EXPECT_EQ(CsvError("row,x\n-1,1\n").message(), "attrs.csv line 2: row \"-1\" is not an item index in [0, 4)");
  EXPECT_EQ(CsvError("row,x\n\n\n1.0,1\n").message(), "attrs.csv line 4: row \"1.0\" is not an item index in [0, 4)");
  EXPECT_EQ(CsvError("row,x\n0,1,2\n").message(), "attrs.csv line 2: 3 cells, expected 2 as in the header");
  EXPECT_EQ(CsvError("row,x\n0\n").message(), "attrs.csv line 2: 1 cells, expected 2 as in the header");
  EXPECT_THAT(CsvError("item,x\n").message(), StartsWith("attrs.csv line 1: the first column must be \"key\""));
  EXPECT_THAT(CsvError("row,in\n").message(), StartsWith("attrs.csv line 1: \"in\" is not a valid attribute name"));
  EXPECT_THAT(CsvError("row,x,\n").message(), StartsWith("attrs.csv line 1: \"\" is not a valid attribute name"));
  EXPECT_EQ(CsvError("row,x,y,x:int\n").message(), "attrs.csv line 1: attribute \"x\" appears twice");
  EXPECT_EQ(CsvError("").message(), "attrs.csv: empty file; expected a header line such as key,price");
  EXPECT_EQ(CsvError("\n \n").message(), "attrs.csv: empty file; expected a header line such as key,price");
  std::string wide = "row";
  for (int c = 0; c < 257; ++c) wide += ",c" + std::to_string(c);
  EXPECT_THAT(CsvError(wide + "\n").message(), HasSubstr("257 attribute columns; at most 256"));
}

// Random tables written as typed CSV (quoting what needs it) parse back to
// the same table.
TEST(ItemAttributesCsvTest, WrittenTablesParseBack) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 300);
    const ItemAttributes a = RandomTable(rng, n, trial % 2 ? 0.3 : 0.0);
    std::vector<std::string> keys;
    for (int64_t i = 0; i < n; ++i) keys.push_back("item " + std::to_string(i) + (i % 3 ? "" : ",x"));
    const auto key_index = KeyIndex(keys);
    const bool by_key = trial % 3 != 0;
    const auto quote = [](const std::string& s) {
      std::string q = "\"";
      for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
      return q + "\"";
    };
    std::string text = by_key ? "key" : "row";
    for (const AttributeColumn& c : a.columns()) text += "," + c.name + ":" + AttributeTypeName(c.type);
    text += trial % 2 ? "\r\n" : "\n";
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i : order) {
      bool any = false;
      for (const AttributeColumn& c : a.columns()) any = any || c.present[i];
      if (!any && rng() % 2) continue;  // not listed at all
      text += by_key ? quote(keys[i]) : std::to_string(i);
      for (const AttributeColumn& c : a.columns()) {
        text += ",";
        if (!c.present[i]) continue;
        char buf[40];
        switch (c.type) {
          case AttributeType::kString: text += quote(c.strings[i]); break;
          case AttributeType::kInt: text += std::to_string(c.ints[i]); break;
          case AttributeType::kFloat:
            std::snprintf(buf, sizeof(buf), "%.17g", c.floats[i]);
            text += buf;
            break;
          case AttributeType::kBool: text += c.bools[i] ? "true" : "False"; break;
        }
      }
      text += "\n";
    }
    auto back = ParseAttributesCsv(text, n, &key_index, "t.csv");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == a) << "trial " << trial;
  }
}

}  // namespace
}  // namespace kls
