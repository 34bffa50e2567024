/* Stand-in for CMSIS-NN's arm_nn_math_types.h (tests only; see ../README.md). */
#ifndef ARM_NN_MATH_TYPES_H
#define ARM_NN_MATH_TYPES_H

#include <limits.h>
#include <stdint.h>

#define NN_Q31_MAX ((int32_t)(0x7FFFFFFFL))
#define NN_Q31_MIN ((int32_t)(0x80000000L))
#define NN_Q7_MAX ((int8_t)(0x7F))
#define NN_Q7_MIN ((int8_t)(0x80))

#endif
