// ReadTextFile(): whatever a user names, the memory it costs is bounded and
// the error names the file and the limit.
#include "topology/text_file.h"

#include <fstream>
#include <string>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "status_matchers.h"
#include "temp_dir.h"

namespace topology {
namespace {

using ::testing::HasSubstr;
using testing::IsOk;
using testing::StatusIs;

TEST(TextFileTest, ReadsWhatFitsAndRefusesTheRest) {
  testing::TempDir dir;
  const std::string fits = (dir.path() / "fits.yaml").string();
  std::ofstream(fits) << std::string(1024, 'a');
  auto text = ReadTextFile(fits, 1024);
  ASSERT_THAT(text.status(), IsOk());
  EXPECT_EQ(text->size(), 1024U);
  EXPECT_THAT(ReadTextFile(fits, 1023),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr(fits + " is larger than 1023 bytes")));
  // Followed, as any file a user names.
  const std::string link = (dir.path() / "link.yaml").string();
  ASSERT_EQ(symlink(fits.c_str(), link.c_str()), 0);
  EXPECT_THAT(ReadTextFile(link, 4096), IsOk());
  EXPECT_THAT(ReadTextFile(dir.path().string(), 4096),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("directory")));
  EXPECT_THAT(ReadTextFile((dir.path() / "absent").string(), 4096),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("No such file or directory")));
  // A device that never ends costs the bound, no more.
  EXPECT_THAT(ReadTextFile("/dev/zero", size_t{4} << 20),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("/dev/zero is larger than 4 MiB")));
}

TEST(TextFileTest, AFifoIsReadToItsEndOrTheBound) {
  testing::TempDir dir;
  const std::string fifo = (dir.path() / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { std::ofstream(fifo) << "kind: Pod\n"; });
  auto text = ReadTextFile(fifo, 100);
  writer.join();
  ASSERT_THAT(text.status(), IsOk());
  EXPECT_EQ(*text, "kind: Pod\n");
  std::thread flood([&] { std::ofstream(fifo) << std::string(300, 'x'); });
  EXPECT_THAT(ReadTextFile(fifo, 100),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("larger than 100 bytes")));
  flood.join();
}

TEST(TextFileTest, ByteSizes) {
  EXPECT_EQ(ByteSize(4U << 20), "4 MiB");
  EXPECT_EQ(ByteSize(512U << 10), "512 KiB");
  EXPECT_EQ(ByteSize(1000), "1000 bytes");
}

}  // namespace
}  // namespace topology
