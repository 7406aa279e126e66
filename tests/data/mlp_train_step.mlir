module @jit_train_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<784x128xf32>, %arg1: tensor<128xf32>, %arg2: tensor<128x10xf32>, %arg3: tensor<10xf32>, %arg4: tensor<64x784xf32>, %arg5: tensor<64xi32>) -> (tensor<784x128xf32> {jax.result_info = "[0][0]"}, tensor<128xf32> {jax.result_info = "[0][1]"}, tensor<128x10xf32> {jax.result_info = "[0][2]"}, tensor<10xf32> {jax.result_info = "[0][3]"}, tensor<f32> {jax.result_info = "[1]"}) {
    %0 = stablehlo.dot_general %arg4, %arg0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<64x784xf32>, tensor<784x128xf32>) -> tensor<64x128xf32>
    %1 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<128xf32>) -> tensor<64x128xf32>
    %2 = stablehlo.add %0, %1 : tensor<64x128xf32>
    %3 = call @relu(%2) : (tensor<64x128xf32>) -> tensor<64x128xf32>
    %4 = stablehlo.dot_general %3, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<64x128xf32>, tensor<128x10xf32>) -> tensor<64x10xf32>
    %5 = stablehlo.broadcast_in_dim %arg3, dims = [1] : (tensor<10xf32>) -> tensor<64x10xf32>
    %6 = stablehlo.add %4, %5 : tensor<64x10xf32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %7 = stablehlo.reduce(%6 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<64x10xf32>, tensor<f32>) -> tensor<64xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0] : (tensor<64xf32>) -> tensor<64x10xf32>
    %9 = stablehlo.subtract %6, %8 : tensor<64x10xf32>
    %10 = stablehlo.exponential %9 : tensor<64x10xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %11 = stablehlo.reduce(%10 init: %cst_0) applies stablehlo.add across dimensions = [1] : (tensor<64x10xf32>, tensor<f32>) -> tensor<64xf32>
    %12 = stablehlo.log %11 : tensor<64xf32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0] : (tensor<64xf32>) -> tensor<64x10xf32>
    %14 = stablehlo.subtract %9, %13 : tensor<64x10xf32>
    %15 = stablehlo.iota dim = 1 : tensor<64x10xi32>
    %16 = stablehlo.broadcast_in_dim %arg5, dims = [0] : (tensor<64xi32>) -> tensor<64x10xi32>
    %17 = stablehlo.compare  EQ, %16, %15,  SIGNED : (tensor<64x10xi32>, tensor<64x10xi32>) -> tensor<64x10xi1>
    %18 = stablehlo.convert %17 : (tensor<64x10xi1>) -> tensor<64x10xf32>
    %19 = stablehlo.multiply %18, %14 : tensor<64x10xf32>
    %20 = stablehlo.reduce(%19 init: %cst_0) applies stablehlo.add across dimensions = [1] : (tensor<64x10xf32>, tensor<f32>) -> tensor<64xf32>
    %21 = stablehlo.reduce(%20 init: %cst_0) applies stablehlo.add across dimensions = [0] : (tensor<64xf32>, tensor<f32>) -> tensor<f32>
    %cst_1 = stablehlo.constant dense<6.400000e+01> : tensor<f32>
    %22 = stablehlo.divide %21, %cst_1 : tensor<f32>
    %23 = stablehlo.negate %22 : tensor<f32>
    %cst_2 = stablehlo.constant dense<-1.562500e-02> : tensor<f32>
    %24 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<64x10xf32>
    %25 = stablehlo.multiply %18, %24 : tensor<64x10xf32>
    %26 = stablehlo.reduce(%25 init: %cst_0) applies stablehlo.add across dimensions = [1] : (tensor<64x10xf32>, tensor<f32>) -> tensor<64xf32>
    %27 = stablehlo.broadcast_in_dim %11, dims = [0] : (tensor<64xf32>) -> tensor<64x10xf32>
    %28 = stablehlo.divide %10, %27 : tensor<64x10xf32>
    %29 = stablehlo.broadcast_in_dim %26, dims = [0] : (tensor<64xf32>) -> tensor<64x10xf32>
    %30 = stablehlo.multiply %28, %29 : tensor<64x10xf32>
    %31 = stablehlo.subtract %25, %30 : tensor<64x10xf32>
    %32 = stablehlo.reduce(%31 init: %cst_0) applies stablehlo.add across dimensions = [0] : (tensor<64x10xf32>, tensor<f32>) -> tensor<10xf32>
    %33 = stablehlo.dot_general %31, %3, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<64x10xf32>, tensor<64x128xf32>) -> tensor<10x128xf32>
    %34 = stablehlo.transpose %33, dims = [1, 0] : (tensor<10x128xf32>) -> tensor<128x10xf32>
    %35 = stablehlo.dot_general %31, %arg2, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<64x10xf32>, tensor<128x10xf32>) -> tensor<64x128xf32>
    %36 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<64x128xf32>
    %37 = stablehlo.compare  GT, %2, %36,  FLOAT : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xi1>
    %38 = stablehlo.select %37, %35, %36 : tensor<64x128xi1>, tensor<64x128xf32>
    %39 = stablehlo.reduce(%38 init: %cst_0) applies stablehlo.add across dimensions = [0] : (tensor<64x128xf32>, tensor<f32>) -> tensor<128xf32>
    %40 = stablehlo.dot_general %38, %arg4, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<64x128xf32>, tensor<64x784xf32>) -> tensor<128x784xf32>
    %41 = stablehlo.transpose %40, dims = [1, 0] : (tensor<128x784xf32>) -> tensor<784x128xf32>
    %cst_3 = stablehlo.constant dense<0.00999999977> : tensor<f32>
    %42 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<784x128xf32>
    %43 = stablehlo.multiply %42, %41 : tensor<784x128xf32>
    %44 = stablehlo.subtract %arg0, %43 : tensor<784x128xf32>
    %45 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<128xf32>
    %46 = stablehlo.multiply %45, %39 : tensor<128xf32>
    %47 = stablehlo.subtract %arg1, %46 : tensor<128xf32>
    %48 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<128x10xf32>
    %49 = stablehlo.multiply %48, %34 : tensor<128x10xf32>
    %50 = stablehlo.subtract %arg2, %49 : tensor<128x10xf32>
    %51 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<10xf32>
    %52 = stablehlo.multiply %51, %32 : tensor<10xf32>
    %53 = stablehlo.subtract %arg3, %52 : tensor<10xf32>
    return %44, %47, %50, %53, %23 : tensor<784x128xf32>, tensor<128xf32>, tensor<128x10xf32>, tensor<10xf32>, tensor<f32>
  }
  func.func private @relu(%arg0: tensor<64x128xf32>) -> tensor<64x128xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<64x128xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<64x128xf32>
    return %1 : tensor<64x128xf32>
  }
}
