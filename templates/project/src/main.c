/* mlfbuild firmware main: the console protocol (docs/protocol.md), the same code on QEMU, the host
 * and real boards. Two dialects share the console:
 *   - framed binary commands (0xA5 0x5A, type, sequence, length, payload, CRC-16) used by
 *     `mlfbuild run`; every reply carries the sequence number of the request it answers;
 *   - the MLPerf Tiny runner's ASCII commands, terminated by '%', so the official runner can drive it.
 * A byte that does not start a frame is taken as MLPerf text. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mlf_model.h"
#include "mlfrt.h"

#define PROTOCOL_VERSION 2u
#ifndef MLF_MAX_PAYLOAD
#define MLF_MAX_PAYLOAD 256u
#endif
#ifndef MLF_FRAME_TIMEOUT_MS
/* A frame whose bytes stop arriving for this long is dropped (resync). Emulators count in virtual
 * time, which keeps running while a loaded host delays the console, so QEMU builds use more. */
#define MLF_FRAME_TIMEOUT_MS 1000u
#endif
#ifndef MLF_MLPERF_MODEL_ID
#define MLF_MLPERF_MODEL_ID "ic01"
#endif
#ifndef MLF_BOARD_NAME
#define MLF_BOARD_NAME "board"
#endif

#define SYNC0 0xA5u
#define SYNC1 0x5Au

enum { ERR_CRC = 1, ERR_LENGTH = 2, ERR_UNKNOWN = 3, ERR_ARGUMENT = 4, ERR_TIMEOUT = 5 };

static uint8_t frame[MLF_MAX_PAYLOAD + 8];
/* Sequence number of the request being answered (0 while its header is incomplete). The host
 * resends a request whose reply does not come; the number lets it drop replies to old copies. */
static uint8_t s_seq;

/* ---------------------------------------------------------------- text */

/* Two small loops instead of newlib's strcmp and strncmp, which are tuned for speed and cost
 * about 0.9 KB of flash together; the console never compares more than a short command. */
static int starts_with(const char* text, const char* prefix) {
  for (; *prefix != '\0'; text++, prefix++) {
    if (*text != *prefix) return 0;
  }
  return 1;
}

static int text_equal(const char* a, const char* b) { return starts_with(a, b) && a[strlen(b)] == '\0'; }

/* ---------------------------------------------------------------- framing */

static uint16_t crc16_update(uint16_t crc, uint8_t byte) {
  /* CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, no final xor. */
  crc ^= (uint16_t)(byte << 8);
  for (int bit = 0; bit < 8; bit++) {
    crc = (crc & 0x8000u) ? (uint16_t)((crc << 1) ^ 0x1021u) : (uint16_t)(crc << 1);
  }
  return crc;
}

static uint32_t get_u32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void put_u32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static void send_frame(uint8_t type, const uint8_t* payload, uint32_t length) {
  uint8_t head[6] = {SYNC0, SYNC1, type, s_seq, (uint8_t)length, (uint8_t)(length >> 8)};
  uint16_t crc = 0xFFFFu;
  for (int i = 2; i < 6; i++) crc = crc16_update(crc, head[i]);
  for (uint32_t i = 0; i < length; i++) crc = crc16_update(crc, payload[i]);
  uint8_t tail[2] = {(uint8_t)crc, (uint8_t)(crc >> 8)};
  mlfrt_write(head, sizeof head);
  mlfrt_write(payload, length);
  mlfrt_write(tail, sizeof tail);
}

static void send_error(uint8_t code, const char* message) {
  uint8_t payload[64];
  size_t length = strlen(message);
  if (length > sizeof payload - 1) length = sizeof payload - 1;
  payload[0] = code;
  memcpy(payload + 1, message, length);
  send_frame('z', payload, (uint32_t)length + 1u);
}

/* Reads the rest of a frame after SYNC0 SYNC1. Returns the payload length, or -1 when the frame
 * was dropped (timeout, bad length or CRC), after telling the host with an error frame. */
static int read_frame(uint8_t* type) {
  uint8_t head[4]; /* type, sequence, length (LE) */
  s_seq = 0;
  for (int i = 0; i < 4; i++) {
    int c = mlfrt_getc(MLF_FRAME_TIMEOUT_MS);
    if (c < 0) {
      send_error(ERR_TIMEOUT, "frame timeout");
      return -1;
    }
    head[i] = (uint8_t)c;
  }
  s_seq = head[1];
  uint32_t length = (uint32_t)head[2] | ((uint32_t)head[3] << 8);
  if (length > MLF_MAX_PAYLOAD) {
    send_error(ERR_LENGTH, "payload too long");
    return -1;
  }
  uint16_t crc = 0xFFFFu;
  for (int i = 0; i < 4; i++) crc = crc16_update(crc, head[i]);
  for (uint32_t i = 0; i < length + 2u; i++) {
    int c = mlfrt_getc(MLF_FRAME_TIMEOUT_MS);
    if (c < 0) {
      send_error(ERR_TIMEOUT, "frame timeout");
      return -1;
    }
    frame[i] = (uint8_t)c;
    if (i < length) crc = crc16_update(crc, (uint8_t)c);
  }
  uint16_t received = (uint16_t)(frame[length] | (frame[length + 1u] << 8));
  if (received != crc) {
    send_error(ERR_CRC, "bad checksum");
    return -1;
  }
  *type = head[0];
  return (int)length;
}

/* ---------------------------------------------------------------- models */

typedef struct {
  int32_t status;
  uint32_t ticks;
} run_result_t;

/* `restart_timer` restarts the timer before the model runs, which makes the measurement repeat
 * exactly under an instruction-counting emulator; MLPerf runs keep one time base for their laps. */
static run_result_t run_model(const mlf_model_t* model, int restart_timer) {
  run_result_t result;
  mlf_workspace_reset();
  if (restart_timer) mlfrt_timer_start();
  uint32_t start = mlfrt_timer_ticks();
  result.status = model->run();
  result.ticks = mlfrt_timer_ticks() - start;
  return result;
}

static const mlf_tensor_t* find_tensor(const uint8_t* args, int inputs) {
  if (args[0] >= mlf_num_models) return NULL;
  const mlf_model_t* model = mlf_models[args[0]];
  if (inputs) return args[1] < model->num_inputs ? &model->inputs[args[1]] : NULL;
  return args[1] < model->num_outputs ? &model->outputs[args[1]] : NULL;
}

static void handle_frame(uint8_t type, uint32_t length) {
  uint8_t reply[32];
  switch (type) {
    case 'H': { /* hello: version, models, timer rate, max payload, board name */
      const char* board = MLF_BOARD_NAME;
      size_t name_length = strlen(board);
      if (name_length > sizeof reply - 10u) name_length = sizeof reply - 10u;
      reply[0] = PROTOCOL_VERSION;
      reply[1] = (uint8_t)mlf_num_models;
      put_u32(reply + 2, mlfrt_timer_hz());
      put_u32(reply + 6, MLF_MAX_PAYLOAD);
      memcpy(reply + 10, board, name_length);
      send_frame('h', reply, 10u + (uint32_t)name_length);
      return;
    }
    case 'P': /* ping: echo the payload */
      send_frame('p', frame, length);
      return;
    case 'W': { /* write input: model, index, offset, bytes */
      if (length < 6u) break;
      const mlf_tensor_t* tensor = find_tensor(frame, 1);
      uint32_t offset = get_u32(frame + 2), count = length - 6u;
      if (tensor == NULL || offset > tensor->nbytes || count > tensor->nbytes - offset) break;
      memcpy((uint8_t*)tensor->data + offset, frame + 6, count);
      reply[0] = 0;
      send_frame('k', reply, 1u);
      return;
    }
    case 'X': { /* run: status, ticks, workspace peak, stack peak [, the runtime's error text] */
      if (length < 1u || frame[0] >= mlf_num_models) break;
      run_result_t result = run_model(mlf_models[frame[0]], 1);
      uint32_t n = 16u;
      put_u32(frame, (uint32_t)result.status);
      put_u32(frame + 4, result.ticks);
      put_u32(frame + 8, (uint32_t)mlfrt_workspace_peak());
      put_u32(frame + 12, (uint32_t)mlfrt_stack_peak());
      const char* message = result.status != 0 ? mlf_last_error() : NULL;
      for (; message != NULL && message[n - 16u] != '\0' && n < MLF_MAX_PAYLOAD; n++) frame[n] = (uint8_t)message[n - 16u];
      send_frame('x', frame, n);
      return;
    }
    case 'R': { /* read output: model, index, offset, count */
      if (length < 8u) break;
      const mlf_tensor_t* tensor = find_tensor(frame, 0);
      uint32_t offset = get_u32(frame + 2), count = (uint32_t)frame[6] | ((uint32_t)frame[7] << 8);
      if (tensor == NULL || offset > tensor->nbytes || count > tensor->nbytes - offset || count > MLF_MAX_PAYLOAD) break;
      send_frame('o', (const uint8_t*)tensor->data + offset, count);
      return;
    }
    case 'Q': { /* quit with an exit code */
      int code = length >= 1u ? frame[0] : 0;
      send_frame('q', NULL, 0u);
      mlfrt_exit(code);
    }
    default:
      send_error(ERR_UNKNOWN, "unknown command");
      return;
  }
  send_error(ERR_ARGUMENT, "bad arguments");
}

/* ---------------------------------------------------------------- MLPerf Tiny */

#define EE_CMD_SIZE 80u

static char command[EE_CMD_SIZE + 1u];
static uint32_t command_length;
static uint32_t db_expected, db_loaded;

/* Console text goes out byte for byte (the MLPerf runner wants "\r\n" on every target). */
static void put_text(const char* text) { mlfrt_write(text, strlen(text)); }

static void puts_line(const char* text) {
  put_text(text);
  put_text("\r\n");
}

static void put_hex_byte(uint8_t value) {
  static const char hex[] = "0123456789abcdef";
  mlfrt_putc((uint8_t)hex[value >> 4]);
  mlfrt_putc((uint8_t)hex[value & 15u]);
}

static uint64_t elapsed_us(void) {
  uint32_t hz = mlfrt_timer_hz();
  return hz ? mlfrt_udiv64(mlfrt_timer_ticks64() * 1000000u, hz, NULL) : 0u;
}

static void lap(void) {
  put_text("m-lap-us-");
  mlfrt_put_u64(elapsed_us());
  put_text("\r\n");
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static uint32_t parse_uint(const char** cursor, uint32_t fallback) {
  const char* p = *cursor;
  while (*p == ' ') p++;
  if (*p < '0' || *p > '9') return fallback;
  uint32_t value = 0;
  while (*p >= '0' && *p <= '9') value = value * 10u + (uint32_t)(*p++ - '0');
  *cursor = p;
  return value;
}

/* Results as the runner expects them: floats with three decimals. Integer outputs are mapped onto
 * [0, 1] over their type's range so the vector never sums to zero. */
static void print_results(void) {
  const mlf_tensor_t* out = &mlf_models[0]->outputs[0];
  uint32_t width = out->dtype_bits / 8u ? out->dtype_bits / 8u : 1u;
  put_text("m-results-[");
  for (uint32_t i = 0; i < out->nbytes / width; i++) {
    const uint8_t* p = (const uint8_t*)out->data + i * width;
    int32_t milli; /* 32-bit arithmetic only: no 64-bit or double helpers from libgcc */
    if (out->dtype_code == 2u && width == 4u) {
      float f;
      memcpy(&f, p, sizeof f);
      f = f > 2e6f ? 2e6f : (f < -2e6f ? -2e6f : f);
      milli = (int32_t)(f * 1000.0f);
    } else {
      int32_t v = (out->dtype_code == 0u && width == 1u) ? (int32_t)(int8_t)p[0] + 128 : (int32_t)p[0];
      milli = v * 1000 / 255;
    }
    if (i) mlfrt_putc(',');
    if (milli < 0) {
      mlfrt_putc('-');
      milli = -milli;
    }
    mlfrt_put_u32((uint32_t)milli / 1000u);
    mlfrt_putc('.');
    uint32_t frac = (uint32_t)milli % 1000u;
    mlfrt_putc((uint8_t)('0' + frac / 100u));
    mlfrt_putc((uint8_t)('0' + frac / 10u % 10u));
    mlfrt_putc((uint8_t)('0' + frac % 10u));
  }
  put_text("]\r\n");
}

static void mlperf_infer(const char* args) {
  uint32_t iterations = parse_uint(&args, 1u), warmups = parse_uint(&args, 10u);
  if (iterations == 0u) {
    puts_line("e-[Inference iterations must be >0]");
    return;
  }
  put_text("m-warmup-start-");
  mlfrt_put_u32(warmups);
  put_text("\r\n");
  for (uint32_t i = 0; i < warmups; i++) run_model(mlf_models[0], 0);
  puts_line("m-warmup-done");
  put_text("m-infer-start-");
  mlfrt_put_u32(iterations);
  put_text("\r\n");
  lap();
  for (uint32_t i = 0; i < iterations; i++) run_model(mlf_models[0], 0);
  lap();
  puts_line("m-infer-done");
  print_results();
}

static void mlperf_db(const char* args) {
  const mlf_tensor_t* in = &mlf_models[0]->inputs[0];
  if (starts_with(args, "load")) {
    const char* p = args + 4;
    uint32_t n = parse_uint(&p, 0u);
    if (p == args + 4) {
      puts_line("e-[Command 'db load' requires the # of bytes]");
    } else if (n == 0u) {
      puts_line("e-[Command 'db load' must be >0 bytes]");
    } else if (n > in->nbytes) {
      puts_line("e-[Command 'db load' exceeds the model input size]");
    } else {
      db_expected = n;
      db_loaded = 0;
      put_text("m-[Expecting ");
      mlfrt_put_u32(n);
      puts_line(" bytes]");
    }
  } else if (starts_with(args, "print")) {
    for (uint32_t i = 0; i < db_loaded; i += 8u) {
      put_text("m-buffer");
      for (uint32_t j = i; j < db_loaded && j < i + 8u; j++) {
        mlfrt_putc('-');
        put_hex_byte(((const uint8_t*)in->data)[j]);
      }
      put_text("\r\n");
    }
  } else {
    size_t digits = strlen(args);
    if (digits % 2u) {
      puts_line("e-[Insufficent number of hex digits]");
      return;
    }
    for (size_t i = 0; i < digits; i += 2u) {
      int hi = hex_value(args[i]), lo = hex_value(args[i + 1u]);
      if (hi < 0 || lo < 0) {
        put_text("e-[Invalid hex digit '");
        mlfrt_putc((uint8_t)args[i]);
        mlfrt_putc((uint8_t)args[i + 1u]);
        puts_line("']");
        return;
      }
      if (db_loaded < db_expected) ((uint8_t*)in->data)[db_loaded++] = (uint8_t)(hi << 4 | lo);
    }
    if (db_expected != 0u && db_loaded == db_expected) puts_line("m-load-done");
  }
}

static void handle_mlperf(char* text) {
  while (*text == ' ') text++;
  if (text_equal(text, "name")) {
    puts_line("m-name-dut-[mlfbuild " MLF_BOARD_NAME "]");
  } else if (text_equal(text, "profile")) {
    puts_line("m-profile-[mlfbuild firmware 1]");
    puts_line("m-model-[" MLF_MLPERF_MODEL_ID "]");
  } else if (text_equal(text, "help")) {
    puts_line("name profile timestamp db infer results help");
  } else if (text_equal(text, "timestamp")) {
    lap();
  } else if (starts_with(text, "db ")) {
    mlperf_db(text + 3);
  } else if (starts_with(text, "infer") && (text[5] == '\0' || text[5] == ' ')) {
    mlperf_infer(text + 5);
  } else if (text_equal(text, "results")) {
    print_results();
  } else {
    put_text("e-[Unknown command: ");
    put_text(text);
    puts_line("]");
  }
  puts_line("m-ready");
}

static void mlperf_byte(uint8_t c) {
  if (c == '%') {
    command[command_length] = '\0';
    handle_mlperf(command);
    command_length = 0;
  } else if (c >= 0x20u && c < 0x7Fu && command_length < EE_CMD_SIZE) {
    command[command_length++] = (char)c;
  }
}

/* ---------------------------------------------------------------- main */

int main(void) {
  mlfrt_init();
  puts_line("m-timestamp-mode-performance");
  puts_line("m-init-done");
  puts_line("m-ready");
  for (;;) {
    int c = mlfrt_getc(0u);
    if (c < 0) continue;
    if ((uint8_t)c != SYNC0) {
      mlperf_byte((uint8_t)c);
      continue;
    }
    int next = mlfrt_getc(MLF_FRAME_TIMEOUT_MS);
    while (next == (int)SYNC0) next = mlfrt_getc(MLF_FRAME_TIMEOUT_MS);
    if (next != (int)SYNC1) continue;
    uint8_t type = 0;
    int length = read_frame(&type);
    if (length >= 0) handle_frame(type, (uint32_t)length);
  }
}
