// The SSE parser: events come out whole however the bytes are split, with comments and CRLF handled.

#include <gtest/gtest.h>

#include "bench_client/sse.h"

namespace hearth::bench {
namespace {

std::vector<SseEvent> feed_in_pieces(const std::string& stream, size_t piece) {
  SseParser parser;
  std::vector<SseEvent> all;
  for (size_t i = 0; i < stream.size(); i += piece) {
    for (auto& ev : parser.feed(std::string_view(stream).substr(i, piece))) all.push_back(std::move(ev));
  }
  return all;
}

TEST(SseParser, SplitsEventsOnBlankLines) {
  SseParser parser;
  auto events = parser.feed("data: {\"a\":1}\n\ndata: [DONE]\n\n");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].data, "{\"a\":1}");
  EXPECT_EQ(events[1].data, "[DONE]");
  EXPECT_FALSE(parser.has_partial());
}

TEST(SseParser, SameEventsForEveryWayOfSplittingTheBytes) {
  const std::string stream =
      ": keep-alive\r\n\r\nevent: delta\r\ndata: line one\r\ndata:line two\r\n\r\ndata: {\"x\": \"}\"}\n\n";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    auto events = feed_in_pieces(stream, piece);
    ASSERT_EQ(events.size(), 2u) << "piece " << piece;
    EXPECT_EQ(events[0].event, "delta");
    EXPECT_EQ(events[0].data, "line one\nline two");  // one leading space is dropped, the rest kept
    EXPECT_EQ(events[1].event, "");
    EXPECT_EQ(events[1].data, "{\"x\": \"}\"}");
  }
}

TEST(SseParser, CommentsAloneMakeNoEvent) {
  SseParser parser;
  EXPECT_TRUE(parser.feed(": keep-alive\n\n: again\n\n").empty());
}

TEST(SseParser, ReportsAnUnfinishedEvent) {
  SseParser parser;
  EXPECT_TRUE(parser.feed("data: {\"half\"").empty());
  EXPECT_TRUE(parser.has_partial());
  SseParser line_done;
  EXPECT_TRUE(line_done.feed("data: {}\n").empty());  // the line is complete, the event is not
  EXPECT_TRUE(line_done.has_partial());
}

}  // namespace
}  // namespace hearth::bench
