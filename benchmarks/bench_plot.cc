#include "bench_plot.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace vbench {
namespace {

// ---- Geometry ----

constexpr double kWidth = 1240, kHeight = 500;
constexpr double kPanelWidth = 310, kPanelHeight = 320;
constexpr double kPanelTop = 95;
constexpr double kPanelLefts[3] = {85, 495, 905};

struct Point {
  double x, y;
};

struct Series {
  std::string name;
  std::string color;
  std::vector<Point> points;  // x ascending
  bool dashed = false;
};

const char* color_for(const std::string& transport, size_t index) {
  if (transport == "tcp") return "#555555";  // the baseline, neutral
  if (transport == "shm") return "#1f77b4";
  if (transport == "rdma") return "#2ca02c";
  if (transport == "toe") return "#d62728";
  static const char* const kOthers[] = {"#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  return kOthers[index % (sizeof kOthers / sizeof kOthers[0])];
}

// Maps values in [lo, hi] (log10 of them on a log axis) onto pixels.
struct Axis {
  double lo, hi;
  bool log;
  double pixel_lo, pixel_hi;

  double to_pixel(double v) const {
    auto f = [&](double u) { return log ? std::log10(u) : u; };
    return pixel_lo + (f(v) - f(lo)) / (f(hi) - f(lo)) * (pixel_hi - pixel_lo);
  }
};

struct Tick {
  double value;
  std::string label;
};

std::string number_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Powers of two in [lo, hi], every stride-th one so that at most 10 show.
std::vector<Tick> size_ticks(double lo, double hi) {
  int first = int(std::ceil(std::log2(lo))), last = int(std::floor(std::log2(hi)));
  int stride = 1;
  while ((last - first) / stride + 1 > 10) stride *= 2;
  std::vector<Tick> ticks;
  for (int e = first; e <= last; ++e) {
    if (e % stride != 0) continue;
    const char* unit = e >= 30 ? "G" : e >= 20 ? "M" : e >= 10 ? "K" : "";
    int shown = e >= 30 ? e - 30 : e >= 20 ? e - 20 : e >= 10 ? e - 10 : e;
    ticks.push_back({std::ldexp(1.0, e), std::to_string(1ull << shown) + unit});
  }
  return ticks;
}

// 1, 2, 5 x 10^k inside [lo, hi]; only 10^k when that range is wide.
std::vector<Tick> log_ticks(double lo, double hi) {
  const bool wide = std::log10(hi / lo) > 3;
  std::vector<Tick> ticks;
  for (int k = int(std::floor(std::log10(lo))); k <= int(std::ceil(std::log10(hi))); ++k) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (wide && m != 1.0) continue;
      double v = m * std::pow(10.0, k);
      if (v >= lo && v <= hi) ticks.push_back({v, number_label(v)});
    }
  }
  return ticks;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

// printf into a std::string.
template <typename... Args>
void emit(std::string& svg, const char* format, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  svg += buf;
}

struct PanelSpec {
  std::string title, y_label, unit;
  Axis x, y;
  std::vector<Tick> x_ticks, y_ticks;
};

void draw_panel(std::string& svg, const PanelSpec& p, const std::vector<Series>& series) {
  const double left = p.x.pixel_lo, right = p.x.pixel_hi;
  const double top = p.y.pixel_hi, bottom = p.y.pixel_lo;
  emit(svg, "<text x='%.1f' y='%.1f' text-anchor='middle' font-size='14' font-weight='bold'>%s</text>\n",
       (left + right) / 2, top - 12, xml_escape(p.title).c_str());
  emit(svg, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#000'/>\n",
       left, top, right - left, bottom - top);
  for (const Tick& t : p.x_ticks) {
    double px = p.x.to_pixel(t.value);
    emit(svg, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n", px, top, px, bottom);
    emit(svg, "<text x='%.1f' y='%.1f' text-anchor='middle'>%s</text>\n", px, bottom + 16,
         t.label.c_str());
  }
  for (const Tick& t : p.y_ticks) {
    double py = p.y.to_pixel(t.value);
    emit(svg, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n", left, py, right, py);
    emit(svg, "<text x='%.1f' y='%.1f' text-anchor='end'>%s</text>\n", left - 6, py + 4,
         t.label.c_str());
  }
  emit(svg, "<text x='%.1f' y='%.1f' text-anchor='middle'>message size (bytes, log scale)</text>\n",
       (left + right) / 2, bottom + 38);
  emit(svg, "<text transform='translate(%.1f,%.1f) rotate(-90)' text-anchor='middle'>%s</text>\n",
       left - 55, (top + bottom) / 2, xml_escape(p.y_label).c_str());

  if (series.empty()) {
    emit(svg, "<text x='%.1f' y='%.1f' text-anchor='middle' fill='#888'>no data</text>\n",
         (left + right) / 2, (top + bottom) / 2);
    return;
  }
  for (const Series& s : series) {
    std::string path;
    for (const Point& pt : s.points)
      emit(path, "%.1f,%.1f ", p.x.to_pixel(pt.x), p.y.to_pixel(pt.y));
    emit(svg, "<polyline fill='none' stroke='%s' stroke-width='2'%s points='%s'/>\n",
         s.color.c_str(), s.dashed ? " stroke-dasharray='6,4'" : "", path.c_str());
    for (const Point& pt : s.points)
      emit(svg, "<circle cx='%.1f' cy='%.1f' r='3.5' fill='%s'><title>%s %g B: %.4g %s</title></circle>\n",
           p.x.to_pixel(pt.x), p.y.to_pixel(pt.y), s.color.c_str(), xml_escape(s.name).c_str(),
           pt.x, pt.y, xml_escape(p.unit).c_str());
  }
}

// One series per transport with ok results of `mode`; y from `value`.
template <typename ValueOf>
std::vector<Series> collect(const std::vector<std::string>& transports,
                            const std::vector<PointResult>& results, Mode mode, ValueOf value) {
  std::vector<Series> out;
  for (size_t i = 0; i < transports.size(); ++i) {
    Series s{transports[i], color_for(transports[i], i), {}};
    for (const PointResult& r : results)
      if (r.status == Status::kOk && r.mode == mode && transports[i] == r.transport)
        s.points.push_back({double(r.msg_size), value(r)});
    std::sort(s.points.begin(), s.points.end(),
              [](const Point& a, const Point& b) { return a.x < b.x; });
    // A log axis cannot show zero: such a point is left out.
    s.points.erase(std::remove_if(s.points.begin(), s.points.end(),
                                  [](const Point& pt) { return !(pt.y > 0); }),
                   s.points.end());
    if (!s.points.empty()) out.push_back(s);
  }
  return out;
}

// [min, max] of the coordinate chosen by pick over all points; {1, 1} if none.
// Only positive values (every axis but x is a log one).
template <typename Pick>
std::pair<double, double> extent(const std::vector<Series>& a, const std::vector<Series>& b,
                                 Pick pick) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto* group : {&a, &b})
    for (const Series& s : *group)
      for (const Point& pt : s.points) {
        if (!(pick(pt) > 0)) continue;
        lo = std::min(lo, pick(pt));
        hi = std::max(hi, pick(pt));
      }
  if (lo > hi) return {1, 1};
  return {lo, hi};
}

}  // namespace

bool write_svg(const std::string& path, const std::string& title,
               const std::vector<std::string>& transports,
               const std::vector<PointResult>& results, std::string* error) {
  std::vector<Series> latency = collect(transports, results, Mode::kPingPong,
                                        [](const PointResult& r) { return r.latency.p50_us; });
  std::vector<Series> throughput = collect(transports, results, Mode::kStream,
                                           [](const PointResult& r) { return derive_metrics(r).gb_per_s; });
  // CPU per message, both ends: streamed messages solid, ping-pong round
  // trips dashed (busy-polling shows there).
  std::vector<Series> cpu = collect(transports, results, Mode::kStream, [](const PointResult& r) {
    return derive_metrics(r).cpu_us_per_msg;
  });
  for (Series& s : collect(transports, results, Mode::kPingPong, [](const PointResult& r) {
         return derive_metrics(r).cpu_us_per_msg;
       })) {
    s.dashed = true;
    cpu.push_back(s);
  }

  // The panels share the x range; a quarter octave of margin each side.
  auto [x_lo, x_hi] = extent(latency, throughput, [](const Point& p) { return p.x; });
  x_lo /= std::pow(2.0, 0.25);
  x_hi *= std::pow(2.0, 0.25);
  // Log y axes with half a step of margin: kernel TCP's small-message
  // throughput, a thousandth of shm's, stays readable.
  auto log_range = [](const std::vector<Series>& group) {
    auto [lo, hi] = extent(group, {}, [](const Point& p) { return p.y; });
    return std::pair<double, double>{std::max(lo, 1e-6) / 1.5, std::max(hi, 1e-6) * 1.5};
  };
  auto [lat_lo, lat_hi] = log_range(latency);
  auto [gbps_lo, gbps_hi] = log_range(throughput);
  auto [cpu_lo, cpu_hi] = log_range(cpu);

  const double bottom = kPanelTop + kPanelHeight;
  auto x_axis = [&](int panel) {
    return Axis{x_lo, x_hi, true, kPanelLefts[panel], kPanelLefts[panel] + kPanelWidth};
  };
  PanelSpec lat{"Ping-pong p50 round-trip latency", "p50 latency (µs, log scale)", "µs",
                x_axis(0), {lat_lo, lat_hi, true, bottom, kPanelTop},
                size_ticks(x_lo, x_hi), log_ticks(lat_lo, lat_hi)};
  PanelSpec thr{"Streaming throughput", "GB/s (1 GB = 1e9 B, log scale)", "GB/s",
                x_axis(1), {gbps_lo, gbps_hi, true, bottom, kPanelTop},
                size_ticks(x_lo, x_hi), log_ticks(gbps_lo, gbps_hi)};
  PanelSpec cpu_panel{"CPU per message (both ends)", "CPU µs per message (log scale)", "µs CPU",
                      x_axis(2), {cpu_lo, cpu_hi, true, bottom, kPanelTop},
                      size_ticks(x_lo, x_hi), log_ticks(cpu_lo, cpu_hi)};

  std::string svg;
  emit(svg, "<?xml version='1.0' encoding='UTF-8'?>\n"
            "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
            "viewBox='0 0 %.0f %.0f' font-family='sans-serif' font-size='12'>\n",
       kWidth, kHeight, kWidth, kHeight);
  emit(svg, "<rect width='100%%' height='100%%' fill='#fff'/>\n");
  emit(svg, "<text x='%.1f' y='24' text-anchor='middle' font-size='15'>%s</text>\n", kWidth / 2,
       xml_escape(title).c_str());
  // Legend: every transport that has data in either panel, in run order.
  double legend_x = kPanelLefts[0];
  for (size_t i = 0; i < transports.size(); ++i) {
    auto has = [&](const std::vector<Series>& group) {
      return std::any_of(group.begin(), group.end(),
                         [&](const Series& s) { return s.name == transports[i]; });
    };
    if (!has(latency) && !has(throughput) && !has(cpu)) continue;
    const char* color = color_for(transports[i], i);
    emit(svg, "<line x1='%.1f' y1='48' x2='%.1f' y2='48' stroke='%s' stroke-width='3'/>\n",
         legend_x, legend_x + 24, color);
    emit(svg, "<text x='%.1f' y='52'>%s</text>\n", legend_x + 30, xml_escape(transports[i]).c_str());
    legend_x += 40 + 8.0 * double(transports[i].size()) + 20;
  }
  if (!cpu.empty()) {
    emit(svg, "<line x1='%.1f' y1='48' x2='%.1f' y2='48' stroke='#000' stroke-width='2'/>\n",
         kPanelLefts[2] + 40, kPanelLefts[2] + 64);
    emit(svg, "<text x='%.1f' y='52'>stream</text>\n", kPanelLefts[2] + 70);
    emit(svg, "<line x1='%.1f' y1='48' x2='%.1f' y2='48' stroke='#000' stroke-width='2' "
              "stroke-dasharray='6,4'/>\n", kPanelLefts[2] + 130, kPanelLefts[2] + 154);
    emit(svg, "<text x='%.1f' y='52'>ping-pong round trip</text>\n", kPanelLefts[2] + 160);
  }
  draw_panel(svg, lat, latency);
  draw_panel(svg, thr, throughput);
  draw_panel(svg, cpu_panel, cpu);
  svg += "</svg>\n";

  std::FILE* f = std::fopen(path.c_str(), "w");
  bool ok = f != nullptr;
  if (ok) {
    ok = std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
    ok = std::fclose(f) == 0 && ok;
  }
  if (!ok) *error = "cannot write " + path + ": " + std::strerror(errno);
  return ok;
}

}  // namespace vbench
